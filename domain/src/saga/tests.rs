//! Tests of the saga machines. Every step of every test checks the invariants
//! ([`invariants::check_invariants`]): every rune an edge, INV-TURN-SEQUENTIAL, one
//! terminal rune per turn carrying its delivery, the fold of the log equal to the live
//! state, a closed session with only terminated agents, a worker's lease held exactly
//! while its deadline row is armed.
//!
//! | module | what |
//! |---|---|
//! | `session_table`, `session_waits`, `session_close`, `session_controls` | the session table of docs/SAGAS.md, row by row (lifecycle, FCMP, waits, controls, restart) |
//! | `agent_table` | the agent table |
//! | `budget_table` | token budgets: usage per turn, agent and session; `budget_exhausted`; adding budget |
//! | `turn_table`, `turn_tasks` | the turn table (conversation and task turns) |
//! | `plan_table` | the autonomy-loop table |
//! | `worker_table` | the workers' protocol (WORKERS.md): claims, fenced reports, lease expiry, interrupts, fenced facts, `head_status`; a property test of random claims, expiries, reports, interrupts and fenced facts |
//! | `tool_table` | tool calls (WORKERS.md "Tools"): the Tool lifecycle row by row, the batch and its resume, deadlines, cancelling; a property test of random reports, approvals, denials, results, timeouts and interrupts |
//! | `claimable` | WORKERS.md's claimable and the runes after which a turn may be claimable, stated once |
//! | `aggregates` | each aggregate at its own boundary (`Record` command): machine-only edges, refusals |
//! | `e2e` | the end-to-end script, anomaly-free |
//! | `props` | property tests over random inputs, with redelivery |
//! | `wire` | the runes' wire form |
//! | `views` | the read-side rows of the composite |
//! | `support`, `outputs`, `journal`, `invariants` | the harness |
//!
//! The harness drives one conversation as the processor would: `support::World` feeds
//! facts at increasing log positions (`Sagas::handle_at`), keeps the deadline table the
//! outcomes arm and disarm, lets a row fall due by moving its clock to the row's
//! `due_at`, and journals every input so that `journal::replay_with_redelivery` can feed
//! it again with any prefix delivered twice.
//!
//! Test names read as the table rows: `given_<state>_when_<input>_then_<runes and
//! states>`; the docs/SAGAS.md tables name the test of each row.

mod agent_table;
mod aggregates;
mod budget_table;
mod claimable;
mod e2e;
mod invariants;
mod journal;
mod outputs;
mod plan_table;
mod policy_table;
mod props;
mod session_close;
mod session_controls;
mod session_table;
mod session_waits;
mod support;
mod tool_table;
mod turn_table;
mod turn_tasks;
mod views;
mod wire;
mod worker_table;
