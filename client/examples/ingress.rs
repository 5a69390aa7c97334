//! An ingress service: registers a person (and the assistant taking part) by their
//! external identities, starts a conversation keyed by its external source and id, and
//! posts the person's messages — then shows that a redelivery changes nothing.
//!
//! ```sh
//! PM_URL=http://127.0.0.1:8080 PM_TOKEN=<ingress token> \
//!   cargo run -p pm-client --example ingress -- --thread demo-1 --messages 3
//! ```
//!
//! Everything is idempotent: running it twice writes nothing the second time.

mod common;

use common::arg;

use pm_client::{
    ids, label, text, ActorKind, AddMessageInput, Client, CommandRequest, MessageAdded,
    MessageQuery, RegisterActorInput, StartConversationInput, Written,
};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn how<T>(w: &Written<T>) -> String {
    let replayed = if w.replayed { ", replayed" } else { "" };
    format!("{:?}{replayed}", w.status).to_lowercase()
}

#[tokio::main]
async fn main() -> Result<()> {
    let client = Client::from_env()?;
    let thread = arg("--thread").unwrap_or_else(|| "demo-1".into());
    let messages: u32 = arg("--messages").map_or(Ok(3), |n| n.parse())?;

    let alice = client
        .register_actor(RegisterActorInput {
            kind: ActorKind::Human,
            display_name: text("Alice")?,
            external_identity: Some(label("example:alice")?),
        })
        .await?;
    println!("actor {} (human Alice): {}", alice.entity.id, how(&alice));
    let assistant = client
        .register_actor(RegisterActorInput {
            kind: ActorKind::Ai,
            display_name: text("Assistant")?,
            external_identity: Some(label("example:assistant")?),
        })
        .await?;
    println!(
        "actor {} (ai Assistant): {}",
        assistant.entity.id,
        how(&assistant)
    );

    let conversation = client
        .start_conversation(StartConversationInput {
            actor_ids: vec![alice.entity.id, assistant.entity.id],
            title: text(format!("Example thread {thread}"))?,
            external_id: Some(label(thread.clone())?),
            external_source: Some(label("example")?),
            status: Some(label("open")?),
            organization: Some(label("example-org")?),
        })
        .await?;
    let conversation_id = conversation.entity.id;
    // The id is known offline: the ingress could have addressed it before asking.
    assert_eq!(conversation_id, ids::conversation_id("example", &thread));
    println!("conversation {conversation_id}: {}", how(&conversation));

    let post = |n: u32, delivery: String| -> Result<CommandRequest<MessageAdded>> {
        let input = AddMessageInput {
            actor_id: alice.entity.id,
            content: text(format!("Please look at item {n}"))?,
            task_id: None,
            external_identity: Some(label(format!("{thread}-msg-{n}"))?),
            time: None,
        };
        // The upstream delivery id is the idempotency key: a retried delivery gets the
        // first answer again.
        Ok(client
            .add_message(conversation_id, input)
            .idempotency_key(delivery))
    };
    let mut last = None;
    for n in 1..=messages {
        let written = post(n, format!("delivery-{thread}-{n}"))?.await?;
        println!("message {n} {}: {}", written.entity.id, how(&written));
        last = Some(written);
    }

    if messages > 0 {
        // The same delivery again: the first answer, replayed.
        let again = post(1, format!("delivery-{thread}-1"))?.await?;
        println!("redelivered message 1 {}: {}", again.entity.id, how(&again));
        // The same message in a new delivery: its derived id exists, nothing is written.
        let new_delivery = post(1, format!("delivery-{thread}-1-bis"))?.await?;
        println!(
            "message 1 in a new delivery {}: {}",
            new_delivery.entity.id,
            how(&new_delivery)
        );
        assert_eq!(
            new_delivery.entity.id,
            ids::message_id(conversation_id, &format!("{thread}-msg-1"))
        );
    }

    let reader = match &last {
        Some(written) => client.after(written),
        None => client.after(&conversation),
    };
    let page = reader
        .messages(&MessageQuery::of(conversation_id).actor_id(alice.entity.id))
        .await?;
    println!(
        "ingress done: conversation {conversation_id} has {} messages by Alice",
        page.items.len()
    );
    Ok(())
}
