//! Given/when/then tests (to be written).
