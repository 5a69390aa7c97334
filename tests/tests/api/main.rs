//! Black-box tests: the real service on port 0 against SQLite and a fresh PostgreSQL
//! database, driven over HTTP.

mod commands;
