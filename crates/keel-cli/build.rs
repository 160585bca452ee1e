//! Sets `keel_e2e_*` cfgs for the tests that drive real browsers, the ACP SDK and npm MCP
//! servers: without their kit they are ignored, with the reason (see `build-support/`).

#[path = "../../build-support/e2e_kits.rs"]
mod e2e_kits;
use e2e_kits::{Kit, Need};

fn main() {
    e2e_kits::declare(&[
        Kit {
            name: "node",
            needs: &[Need::Node],
        },
        Kit {
            name: "browser",
            needs: &[
                Need::Node,
                Need::Chromium,
                Need::Package("crates/keel-serve/e2e/node_modules/playwright-core"),
            ],
        },
        Kit {
            name: "acp",
            needs: &[
                Need::Node,
                Need::Package("crates/keel-acp/e2e/node_modules/@agentclientprotocol/sdk"),
            ],
        },
        e2e_kits::MCP_SERVERS,
    ]);
}
