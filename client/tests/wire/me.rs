//! Who the credential is: `GET /v1/me` with the token, read into [`pm_client::Me`]; the
//! log's principal filter and the principal each event names.

use pm_client::{EventQuery, Me};

use crate::client;
use crate::fake::{problem, Fake, Reply};

#[tokio::test]
async fn given_a_token_when_asking_who_it_is_then_get_me_answers_the_principal() {
    let fake = Fake::start(|_, _| {
        Reply::Answer(
            200,
            vec![],
            r#"{"principal":"alice","roles":["ingress","analyst"],"organizations":["acme"],
               "actors":["0190a0b0-0000-7000-8000-000000000009"],"source":"jwt"}"#
                .into(),
        )
    })
    .await;
    let me: Me = client(&fake.base).me().await.expect("me");
    assert_eq!(me.principal, "alice");
    assert_eq!(me.roles, ["ingress", "analyst"]);
    assert_eq!(me.organizations, ["acme"]);
    assert_eq!(
        me.actors,
        Some(vec!["0190a0b0-0000-7000-8000-000000000009".to_string()])
    );
    assert_eq!(me.source, "jwt");
    let seen = fake.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].method, "GET");
    assert_eq!(seen[0].target, "/v1/me");
    assert_eq!(seen[0].header("authorization"), Some("Bearer t0k3n"));
}

#[tokio::test]
async fn given_a_principal_without_an_actor_list_when_asking_then_actors_is_none() {
    let fake = Fake::start(|n, _| {
        let actors = if n == 0 { r#","actors":null"# } else { "" };
        Reply::Answer(
            200,
            vec![],
            format!(
                r#"{{"principal":"admin","roles":["admin"],"organizations":["*"]{actors},"source":"token"}}"#
            ),
        )
    })
    .await;
    let c = client(&fake.base);
    for _ in 0..2 {
        let me = c.me().await.expect("me");
        assert_eq!(me.actors, None);
        assert_eq!(me.organizations, ["*"]);
        assert_eq!(me.source, "token");
    }
}

#[tokio::test]
async fn given_no_valid_credential_when_asking_then_unauthorized_and_no_retry() {
    let fake = Fake::start(|_, _| Reply::Answer(401, vec![], problem(401, "unauthorized"))).await;
    let err = client(&fake.base).me().await.expect_err("refused");
    assert_eq!(err.code(), Some("unauthorized"));
    assert_eq!(fake.seen().len(), 1);
}

#[tokio::test]
async fn given_a_principal_filter_when_reading_the_log_then_it_is_sent_and_each_event_names_its_principal(
) {
    let fake = Fake::start(|_, _| {
        Reply::Answer(
            200,
            vec![],
            r#"{"items":[{"specversion":"1.0","id":"turn:t:1","source":"/project-manager/turn/t",
               "type":"turn.started","subject":"t","time":"2026-11-22T05:35:27.123456Z",
               "datacontenttype":"application/json","data":{},"position":"7","sequence":"1",
               "eventversion":"1.0","correlationid":"c","role":"saga","principal":"alice"}],
               "next_cursor":"7"}"#
                .into(),
        )
    })
    .await;
    let query = EventQuery::new().with_type("turn.*").principal("alice");
    let page = client(&fake.base).events(&query).await.expect("page");
    let attributes = page.items[0].attributes.as_ref().expect("attributes");
    assert_eq!(attributes.principal.as_deref(), Some("alice"));
    assert_eq!(attributes.role.as_deref(), Some("saga"));
    assert_eq!(
        fake.seen()[0].target,
        "/v1/events?types=turn.*&principal=alice"
    );
}
