//! Sets the `keel_e2e_node` cfg for the test that starts a node MCP server: without node it
//! is ignored, with the reason (see `build-support/`).

#[path = "../../build-support/e2e_kits.rs"]
#[allow(dead_code)]
mod e2e_kits;
use e2e_kits::{Kit, Need};

fn main() {
    e2e_kits::declare(&[Kit {
        name: "node",
        needs: &[Need::Node],
    }]);
}
