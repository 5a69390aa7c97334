//! `PUT` and `DELETE /v1/tool-policies/{name}` (TRUST.md "Tool policies"): one policy
//! stream per name, its facts written through the bus like every other command's.

use pm_domain::tool_policy::{
    policy_id, SetToolPolicy, ToolPolicy, ToolPolicyCommand, ToolPolicyEvent, ToolPolicyRemoved,
    ToolPolicySet,
};

use super::{expect, CommandStore, Commands, ToolPolicyInput};
use crate::bus::{CommandContext, Load, Outcome};
use crate::AppError;

impl<S: CommandStore> Commands<S> {
    /// `project_manager.tool_policy.set`, unless the policy in force says the same.
    ///
    /// # Errors
    /// [`AppError::Domain`] naming a field that breaks its rule; see
    /// [`crate::bus::CommandBus::execute`].
    pub async fn set_tool_policy(
        &self,
        name: &str,
        input: ToolPolicyInput,
        ctx: &CommandContext,
    ) -> Result<Outcome<ToolPolicySet>, AppError> {
        let now = self.clock.now();
        let set = SetToolPolicy::new(
            name,
            input.tools,
            input.action,
            input.approvers,
            input.organizations,
            input.reason,
            now,
        )
        .map_err(|(field, reason)| pm_domain::DomainError::validation(field, reason))?;
        let outcome = self
            .bus
            .execute::<ToolPolicy>(
                policy_id(name),
                Load::Read,
                ToolPolicyCommand::Set(set),
                ctx,
                now,
            )
            .await?;
        expect(outcome, |e| match e {
            ToolPolicyEvent::Set(fact) => Some(fact),
            ToolPolicyEvent::Removed(_) => None,
        })
    }

    /// `project_manager.tool_policy.removed`.
    ///
    /// # Errors
    /// [`AppError::Domain`] (`ToolPolicyNotFound`) when none is in force under `name`.
    pub async fn remove_tool_policy(
        &self,
        name: &str,
        ctx: &CommandContext,
    ) -> Result<Outcome<ToolPolicyRemoved>, AppError> {
        let now = self.clock.now();
        let remove = ToolPolicyCommand::Remove {
            name: name.to_string(),
            now,
        };
        let outcome = self
            .bus
            .execute::<ToolPolicy>(policy_id(name), Load::Read, remove, ctx, now)
            .await?;
        expect(outcome, |e| match e {
            ToolPolicyEvent::Removed(fact) => Some(fact),
            ToolPolicyEvent::Set(_) => None,
        })
    }
}
