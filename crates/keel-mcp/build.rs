//! Sets `keel_e2e_*` cfgs for the tests that start node and the npm MCP servers: without
//! their kit they are ignored, with the reason (see `build-support/`).

#[path = "../../build-support/e2e_kits.rs"]
#[allow(dead_code)]
mod e2e_kits;
use e2e_kits::{Kit, Need};

fn main() {
    e2e_kits::declare(&[
        Kit {
            name: "node",
            needs: &[Need::Node],
        },
        e2e_kits::MCP_SERVERS,
    ]);
}
