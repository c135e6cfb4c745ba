//! Which tools the rules leave nothing to: a tool every call of which the rules deny is not
//! worth offering to a model (`dsh tools` leaves it out).

use super::{PermissionAction, PermissionRules};

impl PermissionRules {
    /// Whether every call of `tool` is denied whatever its arguments: a bare deny rule names
    /// it, or the default is `deny` and no allow or ask rule (bare or with a pattern) names it.
    pub fn denies_every_call(&self, tool: &str) -> bool {
        if self
            .deny
            .iter()
            .any(|r| r.pattern.is_none() && r.names(tool))
        {
            return true;
        }
        self.default == PermissionAction::Deny
            && !self
                .allow
                .iter()
                .chain(self.ask.iter())
                .any(|r| r.names(tool))
    }
}

#[cfg(test)]
mod tests {
    use dsh_core::ToolRegistry;

    use super::*;

    fn rules(text: &str) -> PermissionRules {
        PermissionRules::from_toml(text, ToolRegistry::new()).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn bare_deny_and_a_default_deny_nothing_reopens_leave_a_tool_out() {
        let r = rules("[permissions]\ndeny = [\"bash\", \"write(secrets/*)\", \"web*\"]\n");
        assert!(r.denies_every_call("bash"));
        assert!(r.denies_every_call("webfetch"));
        assert!(!r.denies_every_call("write"), "only some writes are denied");
        assert!(!r.denies_every_call("read"));
        let r = rules(
            "[permissions]\nallow = [\"read(src/*)\"]\nask = [\"edit\"]\ndefault = \"deny\"\n",
        );
        assert!(!r.denies_every_call("read"), "some reads are allowed");
        assert!(!r.denies_every_call("edit"), "edits may be approved");
        assert!(r.denies_every_call("bash"));
    }
}
