//! `dsh demo`: a bundled small project copied into a temporary workspace and a bundled scripted
//! session run through the full pipeline: parallel reads, an edit refused for lack of a read, a
//! read then a successful edit, a write, a call denied by policy, a timeout, and a shell command
//! that the sandbox refuses to let write outside the workspace. The log is written, checked, and
//! its path printed.

use std::path::Path;

use dsh::{Approvals, Policy};

use super::Exit;

const FILES: &[(&str, &str)] = &[
    ("notes.txt", include_str!("demo_project/notes.txt")),
    ("config.toml", include_str!("demo_project/config.toml")),
    ("src/app.py", include_str!("demo_project/src/app.py")),
    ("secrets.env", include_str!("demo_project/secrets.env")),
];
const SCRIPT: &str = include_str!("demo_script.jsonl");
/// The `run_code` step, inserted before the closing message when Code Mode is built in.
#[cfg(feature = "code-mode")]
const CODE_STEP: &str = include_str!("demo_code_step.jsonl");
const POLICY: &str = include_str!("demo_policy.toml");

fn copy_project(root: &Path) -> Result<(), Exit> {
    for (rel, text) in FILES {
        let path = root.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| Exit::internal(format!("cannot create {}: {e}", parent.display())))?;
        }
        std::fs::write(&path, text)
            .map_err(|e| Exit::internal(format!("cannot write {}: {e}", path.display())))?;
    }
    Ok(())
}

pub async fn demo() -> Result<i32, Exit> {
    let base = std::env::temp_dir().join(format!("dsh-demo-{}", dsh::jsonl::session_id()));
    let workspace = base.join("workspace");
    copy_project(&workspace)?;
    super::out(&format!("dsh demo: workspace {}", workspace.display()));
    super::out(
        "policy: file tools, bash and run_code allowed; reads of *secrets* denied; no approvals (asks are rejected);\n        bash sandboxed to the workspace; sleep has a 300 ms budget\n",
    );
    #[allow(unused_mut)]
    let mut policy = Policy::parse(POLICY).map_err(|e| Exit::internal(e.to_string()))?;
    #[allow(unused_mut)]
    let mut script = SCRIPT.to_owned();
    #[cfg(feature = "code-mode")]
    {
        // Native tools and run_code side by side; the program runs just before the closing line.
        policy.mode = dsh::Mode::Both;
        let closing = script.trim_end().rfind('\n').map_or(0, |i| i + 1);
        script.insert_str(closing, CODE_STEP);
    }
    let log = base.join("session.jsonl");
    let prepared = super::run::prepare(super::run::Setup {
        script_text: Some(&script),
        workspace: &workspace,
        session: Some(log.clone()),
        store: None,
        policy,
        approvals: Approvals::Never,
        grants: None,
        demo_tools: true,
        json: false,
        stderr: false,
        hooks: super::run::HookSources::None,
    })
    .await?;
    let code = super::run::drive(&prepared, None, true).await?;
    super::out(&format!("\n{}", prepared.renderer.summary()));
    let problems = dsh::session::check_file(&log)
        .map_err(|e| Exit::internal(format!("{}: {e}", log.display())))?;
    if problems.is_empty() {
        let events = prepared.harness.session().next_seq();
        super::out(&format!(
            "log checks clean: {events} events, every tool/call paired with one tool/result"
        ));
    } else {
        for p in &problems {
            super::out(&format!("{}:{}: {}", log.display(), p.line, p.message));
        }
        return Err(Exit::internal("the demo's log did not check clean"));
    }
    super::out(&format!("log: {}", log.display()));
    super::out(&format!(
        "try: dsh transcript {} --format openai",
        log.display()
    ));
    // The last line (scripts read the lines above; this one only ever comes last).
    #[cfg(feature = "view")]
    super::out(&format!("view it: dsh view {}", log.display()));
    Ok(code)
}
