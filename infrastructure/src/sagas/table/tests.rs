//! The definition machinery at its unit boundary: encoding, statements, select lists.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::*;

static T: Table = Table {
    name: "t",
    read_from: "v",
    key: &["id"],
    columns: &[
        Column::new("id", Ty::Uuid).keep(),
        Column::new("name", Ty::Text),
        Column::new("note", Ty::Text).null(),
        Column::new("seen", Ty::Integer).rule("t.seen + excluded.seen"),
        Column::new("created_at", Ty::Time).keep(),
    ],
    derived: &[Column::new("extra", Ty::Json)],
    statements: Statements::new(),
};

fn fields() -> Fields {
    Fields::new(&T)
}

fn complete(f: &mut Fields) -> &mut Fields {
    f.uuid("id", Uuid::nil())
        .text("name", "a")
        .opt_text("note", None::<String>)
        .int("seen", 1)
        .time("created_at", DateTime::<Utc>::MIN_UTC)
}

#[test]
fn given_every_column_when_finished_then_the_values_are_in_column_order() {
    let mut f = fields();
    // Written in another order than the definition's.
    f.time("created_at", DateTime::<Utc>::MIN_UTC)
        .int("seen", 1)
        .opt_text("note", None::<String>)
        .text("name", "a")
        .uuid("id", Uuid::nil());
    assert_eq!(
        f.finish(),
        Ok(vec![
            Arg::Uuid(Some(Uuid::nil())),
            Arg::Text(Some("a".into())),
            Arg::Text(None),
            Arg::Int(Some(1)),
            Arg::Time(Some(DateTime::<Utc>::MIN_UTC)),
        ])
    );
}

#[test]
fn given_a_row_that_does_not_fit_when_finished_then_it_is_refused_naming_the_column() {
    let refused = |f: &mut Fields| std::mem::replace(f, fields()).finish().unwrap_err();
    let mut f = fields();
    complete(&mut f).text("colour", "red");
    assert_eq!(refused(&mut f), "t has no column colour");
    complete(&mut f).text("name", "twice");
    assert_eq!(refused(&mut f), "t.name is written twice");
    f.text("id", "not an id");
    assert!(refused(&mut f).starts_with("t.id is Uuid"));
    f.opt_text("name", None::<String>);
    assert_eq!(refused(&mut f), "t.name is NOT NULL");
    f.uuid("id", Uuid::nil()).text("name", "a");
    assert_eq!(refused(&mut f), "t.note is not written");
    complete(&mut f);
    assert!(f.finish().is_ok());
}

#[test]
fn given_conflict_rules_then_the_upsert_keeps_replaces_and_applies_them() {
    assert_eq!(
        T.pg_upsert(),
        "INSERT INTO t (id, name, note, seen, created_at) SELECT * FROM \
         UNNEST($1::uuid[], $2::text[], $3::text[], $4::int8[], $5::timestamptz[]) \
         ON CONFLICT (id) DO UPDATE SET name = excluded.name, note = excluded.note, \
         seen = t.seen + excluded.seen"
    );
    assert_eq!(
        T.sqlite_upsert(2),
        "INSERT INTO t (id, name, note, seen, created_at) VALUES \
         ($1, $2, $3, $4, $5), ($6, $7, $8, $9, $10) \
         ON CONFLICT (id) DO UPDATE SET name = excluded.name, note = excluded.note, \
         seen = t.seen + excluded.seen"
    );
}

#[test]
fn given_either_dialect_then_reads_select_the_columns_as_they_are() {
    assert_eq!(T.select_list(), "id, name, note, seen, created_at, extra");
    assert_eq!(T.ty("extra"), Some(Ty::Json));
    assert_eq!(Ty::Json.sql(), SqlType::Text);
    assert_eq!(Ty::Integer.sql(), SqlType::Int);
}
