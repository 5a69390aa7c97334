//! Given/when/then tests of tool policies: the aggregate, each line of the matching rule,
//! each action's verdict, and who may decide a waiting call.

use cqrs_es::test::TestFramework;

use super::*;
use crate::testing::{now, tool_policy as policy, FakeLookup};

type Given = TestFramework<ToolPolicy>;

fn set(p: &ToolPolicySet) -> ToolPolicyCommand {
    let cmd = SetToolPolicy::new(
        &p.name,
        p.tools.clone(),
        p.action,
        p.approvers.clone(),
        p.organizations.clone(),
        p.reason.clone(),
        now(),
    );
    ToolPolicyCommand::Set(cmd.expect("a valid policy"))
}

fn rules(policies: Vec<ToolPolicySet>, organization: Option<&str>) -> PolicyRules {
    PolicyRules {
        policies: policies.into(),
        organization: organization.map(str::to_string),
        default_action: PolicyAction::RequireApproval,
    }
}

fn role(r: &str) -> Approver {
    Approver::Role(r.into())
}

// The aggregate.

#[tokio::test]
async fn given_no_policy_when_set_then_tool_policy_set_fact() {
    let p = policy("shell", "shell.*", PolicyAction::Deny);
    Given::with(FakeLookup::default().services())
        .given_no_previous_events()
        .when_async(set(&p))
        .await
        .then_expect_events(vec![ToolPolicyEvent::Set(p)]);
}

#[tokio::test]
async fn given_a_policy_when_set_the_same_again_then_nothing_is_written() {
    let p = policy("shell", "shell.*", PolicyAction::Deny);
    Given::with(FakeLookup::default().services())
        .given(vec![ToolPolicyEvent::Set(p.clone())])
        .when_async(set(&p))
        .await
        .then_expect_events(vec![]);
}

#[tokio::test]
async fn given_a_policy_when_set_otherwise_then_the_new_one_is_a_fact() {
    let old = policy("shell", "shell.*", PolicyAction::Deny);
    let new = policy("shell", "shell.*", PolicyAction::Allow);
    Given::with(FakeLookup::default().services())
        .given(vec![ToolPolicyEvent::Set(old)])
        .when_async(set(&new))
        .await
        .then_expect_events(vec![ToolPolicyEvent::Set(new)]);
}

#[tokio::test]
async fn given_a_policy_when_removed_then_tool_policy_removed_fact() {
    let p = policy("shell", "shell.*", PolicyAction::Deny);
    let remove = ToolPolicyCommand::Remove {
        name: "shell".into(),
        now: now(),
    };
    Given::with(FakeLookup::default().services())
        .given(vec![ToolPolicyEvent::Set(p)])
        .when_async(remove)
        .await
        .then_expect_events(vec![ToolPolicyEvent::Removed(ToolPolicyRemoved {
            name: "shell".into(),
            removed_at: now(),
        })]);
}

#[tokio::test]
async fn given_a_removed_policy_when_removed_again_then_not_found() {
    let p = policy("shell", "shell.*", PolicyAction::Deny);
    let removed = ToolPolicyRemoved {
        name: "shell".into(),
        removed_at: now(),
    };
    let remove = ToolPolicyCommand::Remove {
        name: "shell".into(),
        now: now(),
    };
    Given::with(FakeLookup::default().services())
        .given(vec![
            ToolPolicyEvent::Set(p),
            ToolPolicyEvent::Removed(removed),
        ])
        .when_async(remove)
        .await
        .then_expect_error(DomainError::ToolPolicyNotFound("shell".into()));
}

#[test]
fn given_bad_fields_when_a_policy_is_made_then_the_field_is_named() {
    let make = |name: &str, tools: &str, action, approvers, organizations| {
        SetToolPolicy::new(
            name,
            tools.into(),
            action,
            approvers,
            organizations,
            None,
            now(),
        )
        .map(|_| ())
        .map_err(|(field, _)| field)
    };
    use PolicyAction::*;
    assert_eq!(make("default", "*", Allow, None, None), Err("name"));
    assert_eq!(make("a/b", "*", Allow, None, None), Err("name"));
    assert_eq!(make("ok", "", Allow, None, None), Err("tools"));
    assert_eq!(
        make("ok", "*", Allow, Some(vec![role("admin")]), None),
        Err("approvers")
    );
    assert_eq!(
        make("ok", "*", RequireApproval, Some(vec![]), None),
        Err("approvers")
    );
    assert_eq!(
        make("ok", "*", Allow, None, Some(vec!["*".into()])),
        Err("organizations")
    );
    assert_eq!(
        make(
            "ok",
            "*",
            RequireApproval,
            Some(vec![role("llm")]),
            Some(vec!["acme".into()])
        ),
        Ok(())
    );
}

#[test]
fn given_approver_names_when_parsed_then_roles_and_principals_are_told_apart() {
    assert_eq!(
        Approver::try_from("role:admin".to_string()),
        Ok(role("admin"))
    );
    assert!(Approver::try_from("role:root".to_string()).is_err());
    assert_eq!(
        Approver::try_from("alice@example.com".to_string()),
        Ok(Approver::Principal("alice@example.com".into()))
    );
    assert!(Approver::try_from("two words".to_string()).is_err());
    assert_eq!(role("ingress").to_string(), "role:ingress");
}

// The matching rule.

#[test]
fn given_globs_when_a_call_is_decided_then_star_and_question_mark_match() {
    let r = rules(vec![policy("one", "shell.r?_*", PolicyAction::Deny)], None);
    assert_eq!(r.decide("shell.rm_rf").policy, "one");
    assert_eq!(r.decide("shell.rm_").policy, "one");
    assert_eq!(r.decide("shell.rmrf").policy, DEFAULT_POLICY);
    assert_eq!(r.decide("xshell.rm_rf").policy, DEFAULT_POLICY);
}

#[test]
fn given_several_matches_when_decided_then_the_fewest_wildcards_win() {
    let r = rules(
        vec![
            policy("broad", "*", PolicyAction::Allow),
            policy("shells", "shell.*", PolicyAction::RequireApproval),
            policy("exact", "shell.rm_rf", PolicyAction::Deny),
        ],
        None,
    );
    assert_eq!(r.decide("shell.rm_rf").policy, "exact");
    assert_eq!(r.decide("shell.ls").policy, "shells");
    assert_eq!(r.decide("http.get").policy, "broad");
}

#[test]
fn given_as_many_wildcards_when_decided_then_the_longest_pattern_wins_then_the_name() {
    let r = rules(
        vec![
            policy("short", "s*", PolicyAction::Allow),
            policy("long", "shell.*", PolicyAction::Deny),
            policy("b-same", "shel?.ls", PolicyAction::Allow),
            policy("a-same", "shell?ls", PolicyAction::Deny),
        ],
        None,
    );
    assert_eq!(r.decide("shell.rm").policy, "long");
    assert_eq!(r.decide("shell.ls").policy, "a-same");
}

#[test]
fn given_policies_of_organizations_when_decided_then_only_the_conversations_apply() {
    let mut acme = policy("acme-shell", "shell.*", PolicyAction::Deny);
    acme.organizations = Some(vec!["acme".into()]);
    let every = policy("all", "*", PolicyAction::Allow);
    let policies = vec![acme, every];
    assert_eq!(
        rules(policies.clone(), Some("acme"))
            .decide("shell.ls")
            .policy,
        "acme-shell"
    );
    assert_eq!(
        rules(policies.clone(), Some("globex"))
            .decide("shell.ls")
            .policy,
        "all"
    );
    assert_eq!(rules(policies, None).decide("shell.ls").policy, "all");
}

#[test]
fn given_no_matching_policy_when_decided_then_the_default_action_applies() {
    let mut r = rules(vec![policy("http", "http.*", PolicyAction::Allow)], None);
    let applied = r.decide("shell.ls");
    assert_eq!(applied.policy, DEFAULT_POLICY);
    assert_eq!(applied.action, PolicyAction::RequireApproval);
    assert_eq!(applied.approvers, Approver::defaults());
    r.default_action = PolicyAction::Allow;
    assert_eq!(r.decide("shell.ls").action, PolicyAction::Allow);
}

// The verdicts.

#[test]
fn given_a_deny_policy_when_a_call_is_reported_then_it_is_denied_naming_the_policy() {
    let applied =
        rules(vec![policy("no-rm", "shell.rm*", PolicyAction::Deny)], None).decide("shell.rm");
    assert_eq!(
        applied.verdict(false, None),
        Verdict::Deny {
            reason: "policy:no-rm".into()
        }
    );
}

#[test]
fn given_require_approval_when_the_worker_says_no_approval_then_approval_is_requested() {
    let mut p = policy("shell", "shell.*", PolicyAction::RequireApproval);
    p.approvers = Some(vec![Approver::Principal("ops-lead".into())]);
    let applied = rules(vec![p.clone()], None).decide("shell.ls");
    let want = Verdict::Approve {
        reason: Some("shell".into()),
        approvers: vec![Approver::Principal("ops-lead".into())],
    };
    assert_eq!(applied.verdict(false, Some("trust me".into())), want);
    p.reason = Some("shells touch the host".into());
    let applied = rules(vec![p], None).decide("shell.ls");
    assert!(matches!(
        applied.verdict(false, None),
        Verdict::Approve { reason: Some(r), .. } if r == "shells touch the host"
    ));
}

#[test]
fn given_allow_when_the_worker_asks_for_approval_then_it_gets_more_care_never_less() {
    let applied =
        rules(vec![policy("http", "http.*", PolicyAction::Allow)], None).decide("http.get");
    assert_eq!(applied.verdict(false, Some("why".into())), Verdict::Run);
    assert_eq!(
        applied.verdict(true, Some("posts to prod".into())),
        Verdict::Approve {
            reason: Some("posts to prod".into()),
            approvers: Approver::defaults(),
        }
    );
}

// Who decides.

fn decider(name: &str, roles: &[&str]) -> Decider {
    Decider {
        name: name.into(),
        roles: roles.iter().map(|r| r.to_string()).collect(),
        open_mode: false,
    }
}

#[test]
fn given_the_reporter_when_it_decides_its_own_call_then_refused_even_if_listed() {
    let admin = decider("admin", &["admin"]);
    assert_eq!(
        admin.may_decide(Some("admin"), &Approver::defaults()),
        Err(Undecidable::Reporter)
    );
}

#[test]
fn given_open_mode_when_the_one_caller_decides_the_call_it_reported_then_permitted() {
    let mut open = decider("open", &["admin", "ingress", "llm", "analyst"]);
    open.open_mode = true;
    assert_eq!(open.may_decide(Some("open"), &Approver::defaults()), Ok(()));
    let only_alice = [Approver::Principal("alice".into())];
    assert_eq!(
        open.may_decide(Some("open"), &only_alice),
        Err(Undecidable::NotAnApprover)
    );
}

#[test]
fn given_a_principal_not_listed_when_it_decides_then_refused() {
    let llm = decider("llm", &["llm"]);
    assert_eq!(
        llm.may_decide(Some("worker-1"), &Approver::defaults()),
        Err(Undecidable::NotAnApprover)
    );
    let ingress = decider("ingress", &["ingress"]);
    let only_alice = [Approver::Principal("alice".into())];
    assert_eq!(
        ingress.may_decide(Some("worker-1"), &only_alice),
        Err(Undecidable::NotAnApprover)
    );
}

#[test]
fn given_a_listed_principal_or_role_when_it_decides_then_permitted() {
    let alice = decider("alice", &["analyst"]);
    assert_eq!(
        alice.may_decide(Some("llm"), &[Approver::Principal("alice".into())]),
        Ok(())
    );
    assert_eq!(alice.may_decide(Some("llm"), &[role("analyst")]), Ok(()));
    assert_eq!(
        decider("ingress", &["ingress"]).may_decide(None, &Approver::defaults()),
        Ok(())
    );
}
