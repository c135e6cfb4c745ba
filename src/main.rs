//! The `dsh` command-line program.

fn main() {
    println!("dsh: the tool execution pipeline of an agent harness\n\nUsage: dsh <COMMAND>\n\nCommands are added as the pipeline lands; see README.md.");
}
