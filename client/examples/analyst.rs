//! An analyst's tool: tasks by status, conversations with their latest checkpoint (page
//! by page), and task statistics overall and per assignee.
//!
//! ```sh
//! PM_URL=http://127.0.0.1:8080 PM_TOKEN=<analyst token> \
//!   cargo run -p pm-client --example analyst -- --page-size 2
//! ```

mod common;

use common::arg;

use futures::TryStreamExt;
use pm_client::{
    Client, ConversationQuery, GroupKey, StatsGroup, TaskQuery, TaskStats, TaskStatsView,
    TaskStatus,
};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn describe(stats: &TaskStats) -> String {
    let counts: Vec<String> = TaskStatus::all()
        .filter(|s| stats.counts.get(*s) > 0)
        .map(|s| format!("{s} {}", stats.counts.get(s)))
        .collect();
    let p50 = stats
        .cycle_time
        .p50_seconds
        .map_or("-".into(), |s| format!("{s:.1}s"));
    format!(
        "total {} [{}], cycle time p50 {p50} over {} task(s)",
        stats.total,
        counts.join(", "),
        stats.cycle_time.count
    )
}

#[tokio::main]
async fn main() -> Result<()> {
    let read = Client::from_env()?.read();
    let page_size: u32 = arg("--page-size").map_or(Ok(50), |n| n.parse())?;

    // Tasks by status: every page of each status.
    for status in TaskStatus::all() {
        let query = TaskQuery::new().status(status).limit(page_size);
        let tasks: Vec<_> = read.walk(query).try_collect().await?;
        println!("tasks {status}: {}", tasks.len());
    }

    // Conversations with their latest checkpoint, page by page.
    let mut query = ConversationQuery::new().limit(page_size);
    let (mut pages, mut total) = (0, 0);
    loop {
        let page = read.conversations(&query).await?;
        pages += 1;
        for c in &page.items {
            total += 1;
            let latest = c
                .latest_checkpoint
                .as_ref()
                .map_or("none".to_string(), |l| {
                    format!("{} ({})", l.checkpoint_type, l.summary.as_str())
                });
            println!(
                "conversation {} {:?}: latest checkpoint {latest}; {} message(s), {} task(s)",
                c.conversation.id,
                c.conversation.title.as_str(),
                c.message_count,
                c.task_count
            );
        }
        match page.next_cursor {
            Some(cursor) => query = query.cursor(cursor),
            None => break,
        }
    }
    println!("conversations: {total} in {pages} page(s)");

    // Statistics.
    if let TaskStatsView::All(stats) = read.task_stats(StatsGroup::All).await? {
        println!("stats: {}", describe(&stats));
    }
    if let TaskStatsView::Grouped { groups, .. } = read.task_stats(StatsGroup::AssignedTo).await? {
        for group in groups {
            let who = match group.key {
                GroupKey::AssignedTo { assigned_to } => {
                    assigned_to.map_or("unassigned".into(), |id| id.to_string())
                }
                GroupKey::Organization { organization } => organization.unwrap_or_default(),
            };
            println!("stats for {who}: {}", describe(&group.stats));
        }
    }
    Ok(())
}
