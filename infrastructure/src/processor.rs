//! The processor runtime's storage, shared by every processor (the read-model projection,
//! the sagas): one row per processor in `processors` holding its cursor, owner and (for
//! projections) the generation of tables it writes, and the events it parked in
//! `parked_events`.
//!
//! - [`cursor`]: inside a processor's own transaction, lock its row at the cursor it
//!   expects (compare-and-set), move the cursor, park an event — so its effects and its
//!   cursor commit together (exactly-once effect).
//! - [`ownership`]: which replica runs a processor — ownership that ends when that
//!   replica dies (an advisory lock on a dedicated connection, or a lock file on SQLite).
//! - [`liveness`]: replicas' ids and whether one is alive (the `application_name` of its
//!   ownership connection), for the `Idempotency-Key` use case's abandoned claims.
//! - [`store`]: [`DbProcessorStore`], the application's `ProcessorStore` port (ownership,
//!   cursors) plus status listings for operators.

pub mod cursor;
pub mod liveness;
pub mod ownership;
pub mod store;

pub use cursor::CursorError;
pub use store::DbProcessorStore;
