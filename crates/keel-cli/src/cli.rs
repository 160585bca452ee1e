//! Command-line arguments (docs/features.md#commands).
//!
//! Invariant: command and option names are a public contract; add, never rename.

use clap::{Args, Parser, Subcommand, ValueEnum};
use keel_config::ModeFlag;
use keel_tools::PermissionMode;
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(
    name = "keel",
    version,
    about = "A DeepSeek-native AI coding agent for the terminal"
)]
#[command(after_help = "Each command's own options: keel COMMAND --help.")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub agent: AgentArgs,
    #[command(flatten)]
    pub reach: ReachArgs,
    #[command(flatten)]
    pub resume: ResumeArgs,
    #[command(flatten)]
    pub place: PlaceArgs,
    /// One JSON event per line (for `keel run`; given here, it applies to the command after).
    #[arg(long, hide = true)]
    pub json: bool,
    /// The interactive session as plain lines instead of the live terminal UI (as when keel
    /// is not on a terminal, or TERM=dumb).
    #[arg(long)]
    pub plain: bool,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one turn (with all its rounds) and exit.
    Run(RunArgs),
    /// Serve the scriptable fake provider on loopback and print its base URL.
    Mock(MockArgs),
    /// A full session against the built-in fake provider; no key, no network.
    Demo(OutputArgs),
    /// List the sessions of this workspace, newest first (`--prune AGE` removes the old ones).
    Sessions(SessionsArgs),
    /// Inspect one session.
    #[command(subcommand)]
    Session(SessionCommand),
    /// The resolved configuration: every value with its source, each provider's effective
    /// retry policy; keys never shown.
    Config(ConfigArgs),
    /// The HTTP API and the browser UI for this workspace.
    Serve(ServeArgs),
    /// An Agent Client Protocol agent on stdin/stdout, for editors.
    Acp(AcpArgs),
    /// MCP servers: `keel mcp list` starts each declared server and shows its tools.
    #[command(subcommand)]
    Mcp(McpCommand),
    /// Show what a workspace's project files (keel.toml, .mcp.json) ask for, and trust them
    /// (bound to their contents).
    Trust(TrustArgs),
    /// Run one command under the sandbox policy and print what is enforced.
    Sandbox(SandboxArgs),
    /// The reliability study: a suite's tasks × models × efforts × variants × repetitions,
    /// each trial a fresh `keel run` graded by the task's verify.sh (`check`, `merge`).
    Eval(EvalArgs),
    /// Store a provider's key for keel (`login`: typed without echo, never on the command
    /// line) or forget it (`logout`); a variable in the environment still wins.
    #[command(subcommand)]
    Auth(AuthCommand),
    /// `keel "PROMPT"`: the interactive session, the prompt sent first (options go before it).
    #[command(external_subcommand)]
    Prompt(Vec<String>),
}

#[derive(Debug, Subcommand)]
pub enum AuthCommand {
    /// Read a key (from the terminal without echo, or one line on stdin) and store it,
    /// owner-only, in $KEEL_HOME/state/ (hidden from the commands keel runs).
    Login {
        /// The provider (default: the configured model's).
        provider: Option<String>,
        #[command(flatten)]
        place: PlaceArgs,
    },
    /// Remove the stored key of a provider (default: the configured model's).
    Logout {
        provider: Option<String>,
        #[command(flatten)]
        place: PlaceArgs,
    },
}

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct EvalArgs {
    #[command(subcommand)]
    pub action: Option<EvalAction>,
    /// A directory of tasks, or `builtin` (the suite that ships with keel).
    #[arg(default_value = "builtin")]
    pub suite: String,
    /// `mock` (each task's scripted model, no key) or PROVIDER/MODEL from your config.
    #[arg(long, value_delimiter = ',', default_value = "mock")]
    pub models: Vec<String>,
    /// `base` (the production prompt) and/or `policy` (with the model's action policy).
    #[arg(long, value_delimiter = ',', default_value = "base,policy")]
    pub variants: Vec<String>,
    /// reasoning_effort values (off|low|medium|high|max), or `default` (none sent).
    #[arg(long, value_delimiter = ',', default_value = "low,max")]
    pub efforts: Vec<String>,
    /// Repetitions of each cell.
    #[arg(long, default_value_t = 10)]
    pub reps: u32,
    /// Trials at once.
    #[arg(long, default_value_t = 4)]
    pub concurrency: u32,
    /// Faults injected at the proxy, per trial: N:STATUS, every:K:STATUS, replay:opaque-400.
    #[arg(long, default_value = "")]
    pub faults: String,
    /// Derive each trial's marker from S (a rerun gets the same markers).
    #[arg(long, value_name = "S")]
    pub seed: Option<u64>,
    /// Stop admitting trials once the estimated spend reaches X (the price table's currency).
    #[arg(long, value_name = "X")]
    pub max_spend: Option<f64>,
    /// Run slice I of N of the matrix (merge the shards with `keel eval merge`).
    #[arg(long, value_name = "I/N")]
    pub shard: Option<String>,
    /// Go on with the run in DIR (its manifest decides everything else).
    #[arg(long, value_name = "DIR", conflicts_with = "out")]
    pub resume: Option<PathBuf>,
    /// Where the run goes: manifest, attempts log, trials, report.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// How each trial's commands are confined (`off` only on purpose: a trial runs the
    /// model's commands).
    #[arg(long, value_enum, value_name = "MODE")]
    pub sandbox: Option<SandboxModeArg>,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Subcommand)]
pub enum EvalAction {
    /// Prove a suite's graders: each must fail on its pristine workdir and pass on reference/.
    Check {
        #[arg(default_value = "builtin")]
        suite: String,
        /// How the graders' commands are confined.
        #[arg(long, value_enum, value_name = "MODE")]
        sandbox: Option<SandboxModeArg>,
    },
    /// Combine shard directories into one report (printed; written to --out if given).
    Merge {
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        #[command(flatten)]
        output: OutputArgs,
    },
}

#[derive(Debug, Args)]
pub struct SandboxArgs {
    /// The mode to run it in (default: the configured one).
    #[arg(long, value_enum, value_name = "M")]
    pub mode: Option<SandboxModeArg>,
    /// The command and its arguments (after `--`).
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<std::ffi::OsString>,
    #[command(flatten)]
    pub reach: ReachArgs,
    #[command(flatten)]
    pub place: PlaceArgs,
}

#[derive(Debug, Args)]
pub struct TrustArgs {
    /// The workspace (default: --cwd or the current directory).
    pub dir: Option<PathBuf>,
    /// List the trusted workspaces and whether their files changed since.
    #[arg(long, conflicts_with_all = ["revoke", "dir"])]
    pub list: bool,
    /// Stop trusting the workspace.
    #[arg(long)]
    pub revoke: bool,
    #[command(flatten)]
    pub place: PlaceArgs,
}

#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// The declared MCP servers, whether each starts, its tools, or why it is down.
    List {
        #[command(flatten)]
        reach: ReachArgs,
        #[command(flatten)]
        place: PlaceArgs,
        #[command(flatten)]
        output: OutputArgs,
    },
}

#[derive(Debug, Subcommand)]
pub enum SessionCommand {
    /// Remove a session: its history, tool calls, checkpoints, snapshots and temp files
    /// (refused while another keel holds it).
    Rm {
        id: String,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// The transcript of a session: its history and what each tool call did.
    Show {
        id: String,
        /// An earlier revision of a compacted history (`keel session show ID` lists them).
        #[arg(long, value_name = "N", conflicts_with = "saved")]
        revision: Option<u64>,
        /// What a file held before a rewind wrote it back (kept when it changed while one of
        /// keel's commands ran): its bytes on stdout, the newest kept (`--json`: every
        /// version of it).
        #[arg(long, value_name = "PATH")]
        saved: Option<String>,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// The latest recovery record of a session (any state), or `null`.
    Recovery {
        id: String,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// A new session sharing another's history up to a turn (its requests begin with the same
    /// bytes, so the provider's cache serves them).
    Fork {
        id: String,
        /// The last turn to keep (all of them by default).
        #[arg(long, value_name = "TURN")]
        at: Option<u64>,
        /// Also put the files back as they were after that turn (what the later turns changed
        /// is undone; a file changed since is a conflict and stops the fork).
        #[arg(long, requires = "at")]
        code: bool,
        #[command(flatten)]
        reach: ReachArgs,
    },
    /// Restore files and/or the conversation to before a turn (the turn's number as in
    /// `keel session show` and the events).
    Rewind {
        id: String,
        /// The first turn to undo: it and every later one.
        #[arg(long, value_name = "TURN")]
        to: u64,
        /// Files only.
        #[arg(long, conflicts_with_all = ["conversation", "both"])]
        code: bool,
        /// The conversation only.
        #[arg(long, conflicts_with_all = ["code", "both"])]
        conversation: bool,
        /// Files and conversation (the default).
        #[arg(long)]
        both: bool,
        /// Also restore files changed since the turn that last wrote them.
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        reach: ReachArgs,
    },
}

/// Every option a command may take, merged from the groups it accepts (and from the same
/// options given before the command's name): what the rest of keel reads.
#[derive(Debug, Clone, Default)]
pub struct CommonArgs {
    pub model: Option<String>,
    /// What gave `model` when it was not the flag (`/model` in a session), as errors name it.
    pub model_named_by: Option<&'static str>,
    pub permission_mode: Option<PermissionModeArg>,
    pub yes: bool,
    pub json: bool,
    pub action_policy: bool,
    pub cwd: Option<PathBuf>,
    pub session: Option<String>,
    pub continue_latest: bool,
    pub add_dirs: Vec<PathBuf>,
    pub trust_workspace: bool,
    pub sandbox: Option<SandboxModeArg>,
    pub plain: bool,
}

/// The model, and what it may do without asking.
#[derive(Debug, Args, Clone, Default)]
pub struct AgentArgs {
    /// The model, as PROVIDER/ID (overrides KEEL_MODEL and config files).
    #[arg(long, value_name = "PROVIDER/ID")]
    pub model: Option<String>,
    /// read-only | plan | ask | auto
    #[arg(long, value_enum)]
    pub permission_mode: Option<PermissionModeArg>,
    /// Same as --permission-mode auto.
    #[arg(long)]
    pub yes: bool,
    /// Add the model's action policy to the system prompt where one applies (an eval switch
    /// for `keel eval`'s `policy` variant; not a setting).
    #[arg(long, hide = true)]
    pub action_policy: bool,
}

/// What commands may reach: extra directories, the sandbox, the workspace's own files.
#[derive(Debug, Args, Clone, Default)]
pub struct ReachArgs {
    /// Also allow writes in DIR (repeatable).
    #[arg(long = "add-dir", value_name = "DIR")]
    pub add_dirs: Vec<PathBuf>,
    /// Apply the workspace's keel.toml and .mcp.json as they are, for this run only (nothing
    /// is recorded; `keel trust` records it).
    #[arg(long)]
    pub trust_workspace: bool,
    /// How commands are confined, for this run: workspace-write | read-only | off.
    #[arg(long, value_enum, value_name = "MODE")]
    pub sandbox: Option<SandboxModeArg>,
}

/// Which session to go on with.
#[derive(Debug, Args, Clone, Default)]
pub struct ResumeArgs {
    /// Resume the session ID.
    #[arg(long, value_name = "ID", conflicts_with = "continue_latest")]
    pub session: Option<String>,
    /// Resume the latest session of this workspace.
    #[arg(short = 'c', long = "continue")]
    pub continue_latest: bool,
}

/// Where keel works.
#[derive(Debug, Args, Clone, Default)]
pub struct PlaceArgs {
    /// Work in DIR instead of the current directory.
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
}

/// Machine-readable output.
#[derive(Debug, Args, Clone, Default)]
pub struct OutputArgs {
    /// Print JSON instead of human output.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ConfigArgs {
    #[command(flatten)]
    pub agent: AgentArgs,
    #[command(flatten)]
    pub reach: ReachArgs,
    #[command(flatten)]
    pub place: PlaceArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct AcpArgs {
    #[command(flatten)]
    pub agent: AgentArgs,
    #[command(flatten)]
    pub reach: ReachArgs,
}

#[derive(Debug, Args)]
pub struct SessionsArgs {
    /// Remove this workspace's sessions not used for AGE (e.g. 30d, 12h, 90m, 2w); one that
    /// another keel holds is left, and said.
    #[arg(long, value_name = "AGE")]
    pub prune: Option<String>,
    /// Subagents' child sessions too, each under its parent (`--json`: one flat array, each
    /// with `parent` and `agent`).
    #[arg(long)]
    pub all: bool,
    #[command(flatten)]
    pub place: PlaceArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// What to ask. A PROMPT that starts with `/` is a slash command. `-` (or no PROMPT with
    /// a piped stdin) reads it from stdin.
    pub prompt: Option<String>,
    #[command(flatten)]
    pub agent: AgentArgs,
    #[command(flatten)]
    pub reach: ReachArgs,
    #[command(flatten)]
    pub resume: ResumeArgs,
    #[command(flatten)]
    pub place: PlaceArgs,
    /// Print one JSON event per line instead of human output.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to bind (loopback by default; port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub addr: std::net::SocketAddr,
    /// The bearer token clients must send (generated when absent). On the command line it is
    /// readable by other local users (/proc/PID/cmdline): prefer KEEL_SERVE_TOKEN or
    /// --token-file.
    #[arg(long, value_name = "T", conflicts_with_all = ["no_auth", "token_file"])]
    pub token: Option<String>,
    /// Read the token from FILE (readable by its owner only).
    #[arg(long, value_name = "FILE", conflicts_with = "no_auth")]
    pub token_file: Option<PathBuf>,
    /// Serve without a token (loopback only).
    #[arg(long)]
    pub no_auth: bool,
    /// Open the UI in the default browser.
    #[arg(long)]
    pub open: bool,
    #[command(flatten)]
    pub agent: AgentArgs,
    #[command(flatten)]
    pub reach: ReachArgs,
    #[command(flatten)]
    pub place: PlaceArgs,
}

#[derive(Debug, Args)]
pub struct MockArgs {
    /// Address to bind (loopback; port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub addr: std::net::SocketAddr,
    /// A built-in scenario name or a scenario JSON file.
    #[arg(long, default_value = "basic", value_name = "NAME-or-FILE")]
    pub scenario: String,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum SandboxModeArg {
    WorkspaceWrite,
    ReadOnly,
    Off,
}

impl SandboxModeArg {
    pub fn mode(self) -> keel_sandbox::SandboxMode {
        match self {
            Self::WorkspaceWrite => keel_sandbox::SandboxMode::WorkspaceWrite,
            Self::ReadOnly => keel_sandbox::SandboxMode::ReadOnly,
            Self::Off => keel_sandbox::SandboxMode::Off,
        }
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum PermissionModeArg {
    ReadOnly,
    Plan,
    Ask,
    Auto,
}

impl CommonArgs {
    /// The permission mode the flags ask for (`--yes` wins over `--permission-mode`).
    pub fn mode_flag(&self) -> Option<ModeFlag> {
        if self.yes {
            return Some(ModeFlag::Yes);
        }
        self.permission_mode.map(|mode| {
            ModeFlag::PermissionMode(match mode {
                PermissionModeArg::ReadOnly => PermissionMode::ReadOnly,
                PermissionModeArg::Plan => PermissionMode::Plan,
                PermissionModeArg::Ask => PermissionMode::Ask,
                PermissionModeArg::Auto => PermissionMode::Auto,
            })
        })
    }
}

impl CommonArgs {
    pub fn with_agent(mut self, agent: &AgentArgs) -> CommonArgs {
        if agent.model.is_some() {
            self.model.clone_from(&agent.model);
        }
        // A mode given after the command's name replaces one given before it.
        if agent.permission_mode.is_some() || agent.yes {
            self.permission_mode = agent.permission_mode;
            self.yes = agent.yes;
        }
        self.action_policy |= agent.action_policy;
        self
    }

    pub fn with_reach(mut self, reach: &ReachArgs) -> CommonArgs {
        self.add_dirs.extend(reach.add_dirs.iter().cloned());
        self.trust_workspace |= reach.trust_workspace;
        self.sandbox = reach.sandbox.or(self.sandbox);
        self
    }

    pub fn with_resume(mut self, resume: &ResumeArgs) -> CommonArgs {
        if resume.session.is_some() || resume.continue_latest {
            self.session.clone_from(&resume.session);
            self.continue_latest = resume.continue_latest;
        }
        self
    }

    pub fn with_place(mut self, place: &PlaceArgs) -> CommonArgs {
        if place.cwd.is_some() {
            self.cwd.clone_from(&place.cwd);
        }
        self
    }

    pub fn with_output(mut self, output: &OutputArgs) -> CommonArgs {
        self.json |= output.json;
        self
    }
}

/// The option groups a command takes (a set of the `Takes::…` flags).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Takes(u8);

impl Takes {
    pub const AGENT: Takes = Takes(1);
    pub const REACH: Takes = Takes(2);
    pub const RESUME: Takes = Takes(4);
    pub const PLACE: Takes = Takes(8);
    pub const JSON: Takes = Takes(16);
    pub const NONE: Takes = Takes(0);

    pub fn has(self, group: Takes) -> bool {
        self.0 & group.0 == group.0
    }
}

impl std::ops::BitOr for Takes {
    type Output = Takes;
    fn bitor(self, other: Takes) -> Takes {
        Takes(self.0 | other.0)
    }
}

impl Command {
    /// The command's name as typed, and the option groups it takes.
    pub fn takes(&self) -> (&'static str, Takes) {
        use Takes as T;
        match self {
            Command::Run(_) => ("run", T::AGENT | T::REACH | T::RESUME | T::PLACE | T::JSON),
            Command::Mock(_) => ("mock", T::NONE),
            Command::Demo(_) => ("demo", T::JSON),
            Command::Sessions(_) => ("sessions", T::PLACE | T::JSON),
            Command::Session(SessionCommand::Fork { .. } | SessionCommand::Rewind { .. }) => {
                ("session", T::REACH)
            }
            Command::Session(_) => ("session", T::JSON),
            Command::Config(_) => ("config", T::AGENT | T::REACH | T::PLACE | T::JSON),
            Command::Serve(_) => ("serve", T::AGENT | T::REACH | T::PLACE),
            Command::Acp(_) => ("acp", T::AGENT | T::REACH),
            Command::Mcp(_) => ("mcp", T::REACH | T::PLACE | T::JSON),
            Command::Trust(_) => ("trust", T::PLACE),
            Command::Sandbox(_) => ("sandbox", T::REACH | T::PLACE),
            Command::Eval(_) => ("eval", T::JSON),
            Command::Auth(_) => ("auth", T::PLACE),
            Command::Prompt(_) => ("\"PROMPT\"", T::AGENT | T::REACH | T::RESUME | T::PLACE),
        }
    }
}

impl Cli {
    /// The first option given before the command's name that the command does not take.
    pub fn misplaced_option(&self) -> Option<(&'static str, &'static str)> {
        let (name, takes) = self.command.as_ref()?.takes();
        let agent = &self.agent;
        let reach = &self.reach;
        let given = [
            (agent.model.is_some() && !takes.has(Takes::AGENT), "--model"),
            (
                agent.permission_mode.is_some() && !takes.has(Takes::AGENT),
                "--permission-mode",
            ),
            (agent.yes && !takes.has(Takes::AGENT), "--yes"),
            (
                agent.action_policy && !takes.has(Takes::AGENT),
                "--action-policy",
            ),
            (
                !reach.add_dirs.is_empty() && !takes.has(Takes::REACH),
                "--add-dir",
            ),
            (
                reach.trust_workspace && !takes.has(Takes::REACH),
                "--trust-workspace",
            ),
            // `keel eval` takes a sandbox mode of its own.
            (
                reach.sandbox.is_some() && !takes.has(Takes::REACH) && name != "eval",
                "--sandbox",
            ),
            (
                self.resume.session.is_some() && !takes.has(Takes::RESUME),
                "--session",
            ),
            (
                self.resume.continue_latest && !takes.has(Takes::RESUME),
                "--continue",
            ),
            (
                self.place.cwd.is_some() && !takes.has(Takes::PLACE),
                "--cwd",
            ),
            (self.json && !takes.has(Takes::JSON), "--json"),
            (
                self.plain && !matches!(self.command, Some(Command::Prompt(_))),
                "--plain",
            ),
        ];
        given
            .into_iter()
            .find(|(misplaced, _)| *misplaced)
            .map(|(_, flag)| (flag, name))
    }

    /// The options given before the command's name (all of them, for the interactive session).
    pub fn before_command(&self) -> CommonArgs {
        CommonArgs {
            json: self.json,
            plain: self.plain,
            ..CommonArgs::default()
        }
        .with_agent(&self.agent)
        .with_reach(&self.reach)
        .with_resume(&self.resume)
        .with_place(&self.place)
    }
}
