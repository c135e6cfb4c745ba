//! The helper's command line: what the tool prints, the helper parses back (property), and bad
//! command lines are refused before anything is contained or run.

use std::ffi::OsString;
use std::path::PathBuf;

use dsh_tool_bash::SandboxMode;
use dsh_tool_bash::sandbox::SandboxArgs;
use proptest::prelude::*;

fn mode() -> impl Strategy<Value = SandboxMode> {
    prop::sample::select(SandboxMode::ALL.to_vec())
}

fn word() -> impl Strategy<Value = String> {
    // Anything, including words that look like the helper's own flags.
    prop_oneof![
        "[ -~]{0,12}",
        Just("--".to_owned()),
        Just("--mode".to_owned()),
        Just("--probe".to_owned()),
        Just("--parent-pid".to_owned()),
        Just("--arg0".to_owned()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]
    #[test]
    fn printed_arguments_parse_back_unchanged(
        mode in mode(),
        roots in prop::collection::vec("/[a-z]{1,8}( [a-z]{1,3})?", 0..3),
        tmp in prop::option::of("/[a-z]{1,8}"),
        max in prop::option::of(any::<u64>()),
        simulate in any::<bool>(),
        parent in prop::option::of(1_u32..),
        arg0 in prop::option::of("[a-z/ ]{1,12}"),
        command in prop::collection::vec(word(), 1..5),
    ) {
        let mut args = SandboxArgs::new(mode, command.iter().map(OsString::from).collect());
        args.roots = roots.iter().map(PathBuf::from).collect();
        args.tmp = tmp.map(PathBuf::from);
        args.max_file_size = max;
        args.simulate_no_landlock = simulate;
        args.parent_pid = parent;
        args.arg0 = arg0.map(OsString::from);
        prop_assert_eq!(SandboxArgs::parse(args.to_args()).unwrap(), args);
    }
}

#[test]
fn a_probe_round_trips_too() {
    let mut args = SandboxArgs::new(SandboxMode::ReadOnly, Vec::new());
    args.probe = true;
    assert_eq!(SandboxArgs::parse(args.to_args()).unwrap(), args);
    let mut args = SandboxArgs::new(SandboxMode::WorkspaceWrite, Vec::new());
    args.serve = true;
    args.tmp = Some(PathBuf::from("/t"));
    assert_eq!(SandboxArgs::parse(args.to_args()).unwrap(), args);
}

#[test]
fn bad_command_lines_are_refused() {
    let cases: &[(&[&str], &str)] = &[
        (&["--", "true"], "--mode is required"),
        (
            &["--mode", "root", "--", "true"],
            "sandbox mode must be one of",
        ),
        (&["--mode", "read-only"], "a command is required after --"),
        (
            &["--mode", "read-only", "--probe", "--", "true"],
            "--probe and --serve take no command",
        ),
        (&["--mode", "read-only", "--root"], "--root needs a value"),
        (
            &["--mode", "read-only", "--max-file-size", "x", "--", "true"],
            "--max-file-size needs",
        ),
        (
            &["--mode", "read-only", "--parent-pid", "0", "--", "true"],
            "--parent-pid needs a process id",
        ),
        (
            &["--mode", "read-only", "--bogus", "--", "true"],
            "unexpected argument \"--bogus\"",
        ),
    ];
    for (argv, want) in cases {
        let e = SandboxArgs::parse(argv.iter().copied())
            .unwrap_err()
            .to_string();
        assert!(e.contains(want), "{argv:?}: {e}");
    }
}

/// `dsh` uses the stand-alone helper installed beside it, and re-executes itself as
/// `dsh __sandbox-exec` when there is none (or it is not an executable file).
#[test]
fn dsh_prefers_the_helper_program_beside_it() {
    use dsh_tool_bash::{DSH_SUBCOMMAND, HELPER_PROGRAM, SandboxHelper};
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let dsh = dir.path().join("dsh");
    std::fs::write(&dsh, "").unwrap();
    let alone = SandboxHelper::for_dsh(&dsh);
    assert_eq!(alone, SandboxHelper::dsh(&dsh));
    let args = SandboxArgs::new(SandboxMode::ReadOnly, vec![OsString::from("true")]);
    assert_eq!(alone.command_args(&args)[0], OsString::from(DSH_SUBCOMMAND));

    let beside = dir.path().join(HELPER_PROGRAM);
    std::fs::write(&beside, "").unwrap();
    std::fs::set_permissions(&beside, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert_eq!(
        SandboxHelper::for_dsh(&dsh),
        SandboxHelper::dsh(&dsh),
        "not executable"
    );
    std::fs::set_permissions(&beside, std::fs::Permissions::from_mode(0o755)).unwrap();
    let helper = SandboxHelper::for_dsh(&dsh);
    assert_eq!(helper, SandboxHelper::new(&beside, Vec::new()));
    assert_eq!(helper.command_args(&args), args.to_args());
}
