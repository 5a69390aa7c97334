//! Sealing a log written before texts were sealed (issue 33, item 4), on both stores: the
//! pass seals batch by batch, and one stopped after a committed batch — the process gone —
//! goes on from where it stood in the next process, sealing every text once, each reading
//! back as written; what was appended after the pass began is not its business.

mod support;

use pm_infrastructure::db::Args;
use pm_infrastructure::keys::old_texts::{seal_next_batch, seal_old_texts, Sealed};
use pm_infrastructure::keys::sealing::{Place, Unreadable};
use pm_infrastructure::sql::Dialect;
use pm_infrastructure::Database;
use pm_test_db::{on_both_backends, TestDb};
use serde_json::{json, Value};
use uuid::Uuid;

const ACTOR_REGISTERED: &str = "project_manager.actor.registered";

/// Appends `n` actor registrations as a version before sealing wrote them: names in the
/// clear, `Name {from}` onwards.
async fn clear_registrations(db: &Database, from: usize, n: usize) {
    let sql = match db.dialect() {
        Dialect::Postgres => {
            "INSERT INTO events (aggregate_type, aggregate_id, sequence, event_type, \
             event_version, payload, metadata) \
             VALUES ('actor', $1, 1, $2, '1.0', CAST($3 AS json), CAST('{}' AS json))"
        }
        Dialect::Sqlite => {
            "INSERT INTO events (aggregate_type, aggregate_id, sequence, event_type, \
             event_version, payload, metadata) VALUES ('actor', $1, 1, $2, '1.0', $3, '{}')"
        }
    };
    for i in from..from + n {
        let id = Uuid::new_v4();
        let payload = json!({"id": id, "kind": "human", "display_name": format!("Name {i}"),
                             "created_at": "2026-11-28T10:00:00.000000Z"});
        db.execute(
            sql,
            Args::new()
                .text(id.to_string())
                .text(ACTOR_REGISTERED)
                .text(payload.to_string()),
        )
        .await
        .expect("appended");
    }
}

/// Every registration's stored payload, in log order.
async fn stored(db: &Database) -> Vec<(String, i64, Value)> {
    db.fetch_all(
        "SELECT aggregate_id, sequence, payload FROM events ORDER BY global_position",
        Args::new(),
    )
    .await
    .expect("read")
    .iter()
    .map(|r| {
        let payload = serde_json::from_str(&r.string("payload").expect("payload")).expect("json");
        (
            r.string("aggregate_id").expect("id"),
            r.int("sequence").expect("sequence"),
            payload,
        )
    })
    .collect()
}

fn in_the_clear(payloads: &[(String, i64, Value)]) -> usize {
    payloads
        .iter()
        .filter(|(_, _, p)| p["display_name"].is_string())
        .count()
}

async fn a_pass_stopped_after_a_batch_goes_on_where_it_stood(db: TestDb) {
    let db = support::migrated(&db, 4).await;
    clear_registrations(&db, 0, 300).await;

    // The first process seals one batch (256 events), then is gone.
    let first = support::keys(&db).await;
    let mut sealed = Sealed::default();
    assert!(seal_next_batch(&db, &first, &mut sealed)
        .await
        .expect("a batch"));
    assert_eq!(sealed.events, 256);
    assert_eq!(in_the_clear(&stored(&db).await), 44);
    drop(first);

    // The next one finishes it, without sealing anything twice.
    let next = support::keys(&db).await;
    let rest = seal_old_texts(&db, &next).await.expect("the pass");
    assert_eq!((rest.events, rest.left, rest.done), (44, 0, true));
    let payloads = stored(&db).await;
    assert_eq!(in_the_clear(&payloads), 0);
    for (i, (id, sequence, payload)) in payloads.into_iter().enumerate() {
        let mut payload = payload;
        let place = Place {
            event_type: ACTOR_REGISTERED,
            aggregate_type: "actor",
            aggregate_id: &id,
            sequence,
            conversation_id: None,
        };
        next.open_payload(&place, &mut payload, Unreadable::Null)
            .await
            .expect("opened");
        assert_eq!(payload["display_name"], format!("Name {i}"));
    }

    // Done once: an event appended after the pass began is the writer's (an older
    // replica's left in the clear, as the README warns), not the pass's.
    clear_registrations(&db, 300, 1).await;
    let again = seal_old_texts(&db, &next).await.expect("the pass");
    assert_eq!((again.events, again.done), (0, true));
    assert_eq!(in_the_clear(&stored(&db).await), 1);
}

on_both_backends!(a_pass_stopped_after_a_batch_goes_on_where_it_stood);
