//! `cargo xtask test`: installs the components nobody here wrote that the tests drive, when the
//! machine lacks them, then runs `cargo test --workspace`. The one list of those components
//! (`.ci/run` runs this command).

use anyhow::Result;

/// A component: how to tell it is there, and how to install it.
struct Component {
    /// What it is, for the log.
    name: &'static str,
    /// A `python3` program that succeeds when it is there.
    probe: &'static str,
    /// The arguments of the `python3` command that installs it.
    install: &'static [&'static str],
}

const COMPONENTS: &[Component] = &[
    Component {
        name: "the Python `mcp` SDK (an MCP client of `dsh mcp serve`)",
        probe: "import mcp",
        install: &["-m", "pip", "install", "--quiet", "mcp==2.3.0"],
    },
    Component {
        name: "the OpenTelemetry protobuf definitions (decode what dsh exports)",
        probe: "import opentelemetry.proto.collector.trace.v1.trace_service_pb2",
        install: &[
            "-m",
            "pip",
            "install",
            "--quiet",
            "opentelemetry-proto==1.45.2",
        ],
    },
];

/// Installs what is missing.
pub fn install() -> Result<()> {
    for c in COMPONENTS {
        let there = std::process::Command::new("python3")
            .args(["-c", c.probe])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !there {
            eprintln!("installing {}", c.name);
            crate::run("python3", c.install)?;
        }
    }
    Ok(())
}

/// Installs what is missing, then runs the tests (`extra` is passed to `cargo test`).
pub fn test(extra: &[String]) -> Result<()> {
    install()?;
    let mut args = vec!["test", "--workspace"];
    args.extend(extra.iter().map(String::as_str));
    crate::run("cargo", &args)
}
