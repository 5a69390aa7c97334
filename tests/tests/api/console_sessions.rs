//! Console sessions end everywhere at once (TRUST.md "The boundary"), on both stores: a
//! cookie copied before its session signed out on one replica is refused afterwards by
//! that replica and by another one on the same database, for the console's own session
//! read and for the API alike; the cookie is `Secure` unless the service listens on
//! loopback.

use pm_tests::{all_tokens, on_both_backends, Response, TestDb, TestService, ADMIN};
use serde_json::json;

use crate::support::config;

/// Signs in with the admin token: the cookie's `name=value`, and the whole `Set-Cookie`.
async fn sign_in(svc: &TestService) -> (String, String) {
    let r = svc
        .post(None, "/console/session", &json!({"token": ADMIN}))
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let set = r.header("set-cookie").expect("a cookie").to_string();
    let pair = set.split(';').next().unwrap_or_default().to_string();
    (pair, set)
}

async fn with_cookie(
    svc: &TestService,
    method: reqwest::Method,
    path: &str,
    cookie: &str,
) -> Response {
    let req = svc
        .client
        .request(method, format!("{}{path}", svc.base))
        .header("cookie", cookie);
    Response::read(req.send().await.expect("sent"))
        .await
        .expect("read")
}

async fn a_copied_cookie_is_refused_after_sign_out_on_every_replica(db: TestDb) {
    let mut first = config(&db);
    first.auth_tokens = all_tokens();
    let a = TestService::start_with(first).await;
    let mut second = config(&db);
    second.auth_tokens = all_tokens();
    let b = TestService::start_with(second).await;

    let (cookie, set) = sign_in(&a).await;
    assert!(!set.contains("Secure"), "plain http on loopback: {set}");
    let copy = cookie.clone();
    for svc in [&a, &b] {
        let me = with_cookie(svc, reqwest::Method::GET, "/console/session", &copy).await;
        assert_eq!(
            (me.status, &me.json["role"]),
            (200, &json!("admin")),
            "{}",
            me.text
        );
        let read = with_cookie(svc, reqwest::Method::GET, "/v1/conversations", &copy).await;
        assert_eq!(read.status, 200, "{}", read.text);
    }

    let out = with_cookie(&a, reqwest::Method::DELETE, "/console/session", &cookie).await;
    assert_eq!(out.status, 204, "{}", out.text);
    assert!(
        out.header("set-cookie")
            .is_some_and(|c| c.contains("Max-Age=0")),
        "the browser's cookie is cleared"
    );
    for svc in [&b, &a] {
        let me = with_cookie(svc, reqwest::Method::GET, "/console/session", &copy).await;
        assert_eq!((me.status, me.code()), (401, "unauthorized"), "{}", me.text);
        let read = with_cookie(svc, reqwest::Method::GET, "/v1/conversations", &copy).await;
        assert_eq!(
            (read.status, read.code()),
            (401, "unauthorized"),
            "{}",
            read.text
        );
    }
    // Signing out again, or without a session, only clears the cookie.
    let again = with_cookie(&b, reqwest::Method::DELETE, "/console/session", &copy).await;
    assert_eq!(again.status, 204, "{}", again.text);
    // A new sign-in is a new session, accepted everywhere.
    let (fresh, _) = sign_in(&b).await;
    let me = with_cookie(&a, reqwest::Method::GET, "/console/session", &fresh).await;
    assert_eq!(me.status, 200, "{}", me.text);
    a.stop().await;
    b.stop().await;
}

async fn the_cookie_is_secure_beyond_loopback(db: TestDb) {
    let mut wide = config(&db);
    wide.auth_tokens = all_tokens();
    wide.bind = "0.0.0.0:0".parse().expect("addr");
    let svc = TestService::start_with(wide).await;
    let (_, set) = sign_in(&svc).await;
    assert!(set.contains("; Secure"), "{set}");
    svc.stop().await;
}

on_both_backends!(
    a_copied_cookie_is_refused_after_sign_out_on_every_replica,
    the_cookie_is_secure_beyond_loopback,
);
