//! The principals file is read again on `SIGHUP` (TRUST.md): a token removed from it is
//! refused from then on, a new one signs in, and a broken file keeps the principals as
//! they were — on the service as a process, sent a real signal.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use pm_tests::TestDb;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::support::{poll, start};

const KEPT: &str = "kept-token-0000000001";
const REMOVED: &str = "removed-token-00000001";
const ADDED: &str = "added-token-0000000001";

fn entry(name: &str, token: &str) -> Value {
    let digest: String = Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    json!({"name": name, "token_sha256": digest, "roles": ["analyst"], "organizations": ["*"]})
}

fn write(path: &Path, text: &str) {
    // Written beside and renamed, as a deployment tool would: a reload never reads half.
    let staged = path.with_extension("staged");
    std::fs::write(&staged, text).expect("written");
    std::fs::rename(&staged, path).expect("renamed");
}

async fn status(base: &str, token: &str) -> u16 {
    reqwest::Client::new()
        .get(format!("{base}/v1/me"))
        .bearer_auth(token)
        .send()
        .await
        .map(|r| r.status().as_u16())
        .unwrap_or(0)
}

fn hangup(pid: u32) {
    let sent = Command::new("kill")
        .args(["-HUP", &pid.to_string()])
        .status()
        .expect("kill -HUP");
    assert!(sent.success());
}

async fn sighup_reloads_the_principals_file(db: TestDb) {
    let dir = std::env::temp_dir().join(format!("pm-reload-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).expect("dir");
    let file = dir.join("principals.json");
    write(
        &file,
        &json!({"principals": [entry("kept", KEPT), entry("removed", REMOVED)]}).to_string(),
    );
    let file_name = file.to_string_lossy().to_string();
    let mut svc = start(&[
        ("DATABASE_URL", db.url.as_str()),
        ("PM_PRINCIPALS_FILE", file_name.as_str()),
    ])
    .await;
    let base = svc.base().to_string();
    assert_eq!(status(&base, KEPT).await, 200);
    assert_eq!(status(&base, REMOVED).await, 200);
    assert_eq!(status(&base, ADDED).await, 401);

    // One token out, one in: after the signal the removed one is refused.
    write(
        &file,
        &json!({"principals": [entry("kept", KEPT), entry("added", ADDED)]}).to_string(),
    );
    hangup(svc.pid());
    let reloaded = poll(Duration::from_secs(5), || async {
        (status(&base, ADDED).await == 200).then_some(())
    })
    .await;
    assert!(reloaded.is_some(), "not reloaded: {}", svc.log_tail(20));
    assert_eq!(
        status(&base, REMOVED).await,
        401,
        "a removed token is refused at once"
    );
    assert_eq!(status(&base, KEPT).await, 200);

    // A broken file keeps the set as it was, and the log says why.
    write(&file, "{\"principals\": [{\"name\": \"x\"");
    hangup(svc.pid());
    let logged = poll(Duration::from_secs(5), || async {
        svc.log()
            .contains("the principals file is not valid")
            .then_some(())
    })
    .await;
    assert!(logged.is_some(), "no error logged: {}", svc.log_tail(20));
    assert_eq!(status(&base, KEPT).await, 200);
    assert_eq!(status(&base, ADDED).await, 200);
    assert_eq!(status(&base, REMOVED).await, 401);
    assert!(svc.is_running());
    svc.terminate(Duration::from_secs(30)).await;
    let _ = std::fs::remove_dir_all(&dir);
}

per_backend!(sighup_reloads_the_principals_file, sqlite: [], postgres: []);
