//! The `driftless` binary: parses the command line and hands over to the libraries.

fn main() {
    println!("driftless: not yet implemented");
}
