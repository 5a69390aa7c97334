//! Reads of forgotten texts through pm-client (TRUST.md "Forgetting a person"): the
//! service answers them `null` with `"forgotten": true`; the client reads each entity as
//! its type with the stand-in text, so reading a forgotten person's actor and messages, or
//! a forgotten conversation — one, a page, a walk — succeeds and shows none of the texts.

use std::time::{Duration, Instant};

use futures::TryStreamExt;
use pm_client::{Client, ConversationQuery, MessageQuery, Uuid};
use pm_domain::personal::STAND_IN;
use pm_tests::{on_both_backends, TestDb, TestService, ADMIN};
use serde_json::json;

use crate::support::{client, start};
use crate::workers::{actors, dispatched};

/// Forgets `path`'s party (admin), answered `200`.
async fn forget(svc: &TestService, path: &str) {
    let r = svc.post(Some(ADMIN), path, &json!({})).await;
    assert_eq!(r.status, 200, "{path}: {}", r.text);
}

/// Waits (10 s) until `read` shows the stand-in: the read model has taken the forgetting.
async fn until_forgotten<F, Fut>(what: &str, read: F) -> String
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = String>,
{
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let shown = read().await;
        if shown.contains(STAND_IN) {
            return shown;
        }
        assert!(Instant::now() < deadline, "{what} still shows {shown}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn messages(admin: &Client, cid: Uuid) -> Vec<pm_client::MessageAdded> {
    admin
        .read()
        .walk(MessageQuery::of(cid))
        .try_collect()
        .await
        .expect("every message, read")
}

async fn reads_of_forgotten_texts_succeed_and_show_none(db: TestDb) {
    let svc = start(&db).await;
    let admin = client(&svc, ADMIN);
    let (human, ai) = actors(&admin).await;
    let (cid, message, _) = dispatched(&admin, human, ai).await;

    forget(&svc, &format!("/v1/actors/{human}/forget")).await;
    let actor = until_forgotten("the actor", || async {
        let actor = admin.read().actor(human).await.expect("the actor, read");
        actor.display_name.as_str().to_string()
    })
    .await;
    assert_eq!(actor, STAND_IN);
    let said = admin
        .read()
        .message(cid, message)
        .await
        .expect("the message, read");
    assert_eq!(said.content.as_str().to_string(), STAND_IN);
    let all = messages(&admin, cid).await;
    assert!(all
        .iter()
        .any(|m| m.id == message && m.content.as_str() == STAND_IN));
    let other = admin.read().actor(ai).await.expect("the AI, read");
    assert_ne!(
        other.display_name.as_str().to_string(),
        STAND_IN,
        "only the forgotten one"
    );

    forget(&svc, &format!("/v1/conversations/{cid}/forget")).await;
    let title = until_forgotten("the conversation", || async {
        let view = admin.read().conversation(cid).await.expect("read");
        view.conversation.title.as_str().to_string()
    })
    .await;
    assert_eq!(title, STAND_IN);
    let page = admin
        .read()
        .conversations(&ConversationQuery::new())
        .await
        .expect("the conversations, read");
    assert!(page.items.iter().any(|c| c.conversation.id == cid));
    svc.stop().await;
}

on_both_backends!(reads_of_forgotten_texts_succeed_and_show_none);
