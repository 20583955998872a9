//! The operations commands' command line: which command, its options, `--help` and `--version`.
//! Parsed with `lexopt` (a tokenizer of arguments, nothing more), the help pages written out
//! below: the packaged binary carries no argument-parsing framework for four commands.
//!
//! The rules: options take their value as `--settle 5` or `--settle=5`; `-h`/`--help` at any
//! level prints that level's help and `help [COMMAND]` the same; a mistake prints what was
//! wrong and the usage line to stderr and exits 2 (as the commands do when they cannot run).

use std::ffi::OsString;
use std::path::PathBuf;

use lexopt::prelude::*;

use super::quarantine::Action;
use super::Command;

/// What the command line asks for.
#[derive(Debug, PartialEq)]
pub enum Parsed {
    /// No command: serve.
    Serve,
    Run(Command),
    /// Help or the version: print it and exit 0.
    Print(String),
}

/// A command line that could not be understood: what was wrong, and the usage line of the
/// command it was for.
#[derive(Debug, PartialEq)]
pub struct Misuse {
    pub message: String,
    pub usage: &'static str,
}

impl std::fmt::Display for Misuse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "error: {}\n\nUsage: {}\n\nFor more information, try '--help'.",
            self.message, self.usage
        )
    }
}

const USAGE: &str = "handler [COMMAND]";
const HELP: &str = "\
Blog backend: serves the API without a command

Usage: handler [COMMAND]

Commands:
  verify      Check every derived copy (post copies, feed, usernames, counters, follows,
              timelines) against the posts and users; exit 0 without drift (changes still on
              their way through the change feed are lag, not drift), 1 with drift or a
              quarantined change, 2 when it cannot run
  quarantine  The changes a projection lane could not apply: list them, replay them (each
              item's current state through its lane's projections) or drop them
  backup      Copy the embedded store to PATH (SQLite online backup; safe while the service
              runs)
  help        Print this message or the help of the given subcommand(s)

Options:
  -h, --help     Print help
  -V, --version  Print version
";

const VERIFY_USAGE: &str = "handler verify [OPTIONS]";
const VERIFY_HELP: &str = "\
Check every derived copy (post copies, feed, usernames, counters, follows, timelines) against
the posts and users; exit 0 without drift (changes still on their way through the change feed
are lag, not drift), 1 with drift or a quarantined change, 2 when it cannot run

Usage: handler verify [OPTIONS]

Options:
      --repair            Write the fixes through the projections, then verify again
      --settle <SECONDS>  Seconds between looks at what drifted (changes still travelling
                          through the change feed are not drift); 0 reports the first look
                          [default: 5]
  -h, --help              Print help
";
/// `--settle`'s default (seconds).
const SETTLE: u64 = 5;

const QUARANTINE_USAGE: &str = "handler quarantine <COMMAND>";
const QUARANTINE_HELP: &str = "\
The changes a projection lane could not apply: list them, replay them (each item's current
state through its lane's projections) or drop them

Usage: handler quarantine <COMMAND>

Commands:
  list    One line per quarantined change: entry id, lane and feed, item, attempts, first and
          last failure, error
  replay  Read each quarantined item as it is now and project it through its lane; applied
          entries are removed. Without ID: every entry
  drop    Remove an entry without applying it (`handler verify --repair` then mends the copies
          it left behind). Give an ID, or `--all`
  help    Print this message or the help of the given subcommand(s)

Options:
  -h, --help  Print help
";
const LIST_USAGE: &str = "handler quarantine list";
const LIST_HELP: &str = "\
One line per quarantined change: entry id, lane and feed, item, attempts, first and last
failure, error

Usage: handler quarantine list

Options:
  -h, --help  Print help
";
const REPLAY_USAGE: &str = "handler quarantine replay [ID]";
const REPLAY_HELP: &str = "\
Read each quarantined item as it is now and project it through its lane; applied entries are
removed. Without ID: every entry

Usage: handler quarantine replay [ID]

Arguments:
  [ID]  The entry to replay (as `list` shows it)

Options:
  -h, --help  Print help
";
const DROP_USAGE: &str = "handler quarantine drop [OPTIONS] [ID]";
const DROP_HELP: &str = "\
Remove an entry without applying it (`handler verify --repair` then mends the copies it left
behind). Give an ID, or `--all`

Usage: handler quarantine drop [OPTIONS] [ID]

Arguments:
  [ID]  The entry to drop (as `list` shows it)

Options:
      --all   Every entry
  -h, --help  Print help
";

const BACKUP_USAGE: &str = "handler backup <PATH>";
const BACKUP_HELP: &str = "\
Copy the embedded store to PATH (SQLite online backup; safe while the service runs)

Usage: handler backup <PATH>

Arguments:
  <PATH>  Where to write the copy (must not exist)

Options:
  -h, --help  Print help
";

/// Parse `args` (the arguments after the program's name).
pub fn parse<I>(args: I) -> Result<Parsed, Misuse>
where
    I: IntoIterator,
    I::Item: Into<OsString>,
{
    let mut p = lexopt::Parser::from_args(args);
    let misuse = |usage: &'static str| move |e: lexopt::Error| Misuse::new(usage, e);
    let Some(arg) = p.next().map_err(misuse(USAGE))? else {
        return Ok(Parsed::Serve);
    };
    match arg {
        Short('h') | Long("help") => Ok(print(HELP)),
        Short('V') | Long("version") => Ok(Parsed::Print(format!(
            "handler {}\n",
            env!("CARGO_PKG_VERSION")
        ))),
        Value(name) => match name.to_str() {
            Some("verify") => verify(&mut p).map_err(misuse(VERIFY_USAGE)),
            Some("quarantine") => quarantine(&mut p),
            Some("backup") => backup(&mut p).map_err(misuse(BACKUP_USAGE)),
            Some("help") => match p.next().map_err(misuse(USAGE))? {
                None => Ok(print(HELP)),
                Some(Value(name)) => match name.to_str() {
                    Some("verify") => Ok(print(VERIFY_HELP)),
                    Some("quarantine") => Ok(print(QUARANTINE_HELP)),
                    Some("backup") => Ok(print(BACKUP_HELP)),
                    Some("help") => Ok(print(HELP)),
                    _ => Err(unknown_command(&name, USAGE)),
                },
                Some(arg) => Err(Misuse::new(USAGE, arg.unexpected())),
            },
            _ => Err(unknown_command(&name, USAGE)),
        },
        arg => Err(Misuse::new(USAGE, arg.unexpected())),
    }
}

impl Misuse {
    fn new(usage: &'static str, e: impl std::fmt::Display) -> Misuse {
        Misuse {
            message: e.to_string(),
            usage,
        }
    }
}

fn print(help: &str) -> Parsed {
    Parsed::Print(help.to_owned())
}

fn unknown_command(name: &std::ffi::OsStr, usage: &'static str) -> Misuse {
    Misuse::new(
        usage,
        format_args!("unrecognized subcommand '{}'", name.to_string_lossy()),
    )
}

fn verify(p: &mut lexopt::Parser) -> Result<Parsed, lexopt::Error> {
    let mut repair = false;
    let mut settle = SETTLE;
    while let Some(arg) = p.next()? {
        match arg {
            Long("repair") => repair = true,
            Long("settle") => settle = p.value()?.parse()?,
            Short('h') | Long("help") => return Ok(print(VERIFY_HELP)),
            arg => return Err(arg.unexpected()),
        }
    }
    Ok(Parsed::Run(Command::Verify { repair, settle }))
}

fn backup(p: &mut lexopt::Parser) -> Result<Parsed, lexopt::Error> {
    let mut path = None;
    while let Some(arg) = p.next()? {
        match arg {
            Value(v) if path.is_none() => path = Some(PathBuf::from(v)),
            Short('h') | Long("help") => return Ok(print(BACKUP_HELP)),
            arg => return Err(arg.unexpected()),
        }
    }
    match path {
        Some(path) => Ok(Parsed::Run(Command::Backup { path })),
        None => Err("the following required arguments were not provided: <PATH>".into()),
    }
}

fn quarantine(p: &mut lexopt::Parser) -> Result<Parsed, Misuse> {
    let top = |e: lexopt::Error| Misuse::new(QUARANTINE_USAGE, e);
    let name = match p.next().map_err(top)? {
        Some(Value(name)) => name,
        Some(Short('h') | Long("help")) => return Ok(print(QUARANTINE_HELP)),
        Some(arg) => return Err(top(arg.unexpected())),
        None => {
            return Err(Misuse::new(
                QUARANTINE_USAGE,
                "'handler quarantine' requires a subcommand",
            ))
        }
    };
    let (usage, action) = match name.to_str() {
        Some("list") => (LIST_USAGE, list(p)),
        Some("replay") => (REPLAY_USAGE, replay(p)),
        Some("drop") => (DROP_USAGE, drop(p)),
        Some("help") => {
            return match p.next().map_err(top)? {
                None => Ok(print(QUARANTINE_HELP)),
                Some(Value(name)) => match name.to_str() {
                    Some("list") => Ok(print(LIST_HELP)),
                    Some("replay") => Ok(print(REPLAY_HELP)),
                    Some("drop") => Ok(print(DROP_HELP)),
                    Some("help") => Ok(print(QUARANTINE_HELP)),
                    _ => Err(unknown_command(&name, QUARANTINE_USAGE)),
                },
                Some(arg) => Err(top(arg.unexpected())),
            }
        }
        _ => return Err(unknown_command(&name, QUARANTINE_USAGE)),
    };
    match action.map_err(|e| Misuse::new(usage, e))? {
        Ok(action) => Ok(Parsed::Run(Command::Quarantine { action })),
        Err(help) => Ok(print(help)),
    }
}

/// An action, or the help page asked for.
type ActionOrHelp = Result<Action, &'static str>;

fn list(p: &mut lexopt::Parser) -> Result<ActionOrHelp, lexopt::Error> {
    if let Some(arg) = p.next()? {
        return match arg {
            Short('h') | Long("help") => Ok(Err(LIST_HELP)),
            arg => Err(arg.unexpected()),
        };
    }
    Ok(Ok(Action::List))
}

fn replay(p: &mut lexopt::Parser) -> Result<ActionOrHelp, lexopt::Error> {
    let mut id = None;
    while let Some(arg) = p.next()? {
        match arg {
            Value(v) if id.is_none() => id = Some(v.string()?),
            Short('h') | Long("help") => return Ok(Err(REPLAY_HELP)),
            arg => return Err(arg.unexpected()),
        }
    }
    Ok(Ok(Action::Replay { id }))
}

fn drop(p: &mut lexopt::Parser) -> Result<ActionOrHelp, lexopt::Error> {
    let mut id = None;
    let mut all = false;
    while let Some(arg) = p.next()? {
        match arg {
            Value(v) if id.is_none() => id = Some(v.string()?),
            Long("all") => all = true,
            Short('h') | Long("help") => return Ok(Err(DROP_HELP)),
            arg => return Err(arg.unexpected()),
        }
    }
    if all && id.is_some() {
        return Err("the argument '--all' cannot be used with '[ID]'".into());
    }
    Ok(Ok(Action::Drop { id, all }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Command {
        match parse(args) {
            Ok(Parsed::Run(c)) => c,
            other => panic!("{args:?}: {other:?}"),
        }
    }

    fn misuse(args: &[&str]) -> Misuse {
        match parse(args) {
            Err(m) => m,
            other => panic!("{args:?}: {other:?}"),
        }
    }

    fn help(args: &[&str]) -> String {
        match parse(args) {
            Ok(Parsed::Print(text)) => text,
            other => panic!("{args:?}: {other:?}"),
        }
    }

    #[test]
    fn no_command_serves() {
        assert_eq!(parse(Vec::<String>::new()), Ok(Parsed::Serve));
    }

    #[test]
    fn verify_takes_repair_and_settle_in_either_form() {
        assert_eq!(
            run(&["verify"]),
            Command::Verify {
                repair: false,
                settle: 5
            }
        );
        assert_eq!(
            run(&["verify", "--repair", "--settle", "1"]),
            Command::Verify {
                repair: true,
                settle: 1
            }
        );
        assert_eq!(
            run(&["verify", "--settle=0"]),
            Command::Verify {
                repair: false,
                settle: 0
            }
        );
        let m = misuse(&["verify", "--settle", "soon"]);
        assert!(m.message.contains("soon"), "{m}");
        assert_eq!(m.usage, VERIFY_USAGE);
        assert!(misuse(&["verify", "--settle"]).message.contains("--settle"));
        assert!(misuse(&["verify", "--fix"]).message.contains("--fix"));
        assert!(misuse(&["verify", "extra"]).message.contains("extra"));
    }

    #[test]
    fn backup_needs_exactly_one_path() {
        assert_eq!(
            run(&["backup", "/tmp/copy.db"]),
            Command::Backup {
                path: "/tmp/copy.db".into()
            }
        );
        assert!(misuse(&["backup"]).message.contains("<PATH>"));
        assert!(misuse(&["backup", "a", "b"]).message.contains('b'));
    }

    #[test]
    fn quarantine_actions() {
        assert_eq!(
            run(&["quarantine", "list"]),
            Command::Quarantine {
                action: Action::List
            }
        );
        assert_eq!(
            run(&["quarantine", "replay"]),
            Command::Quarantine {
                action: Action::Replay { id: None }
            }
        );
        assert_eq!(
            run(&["quarantine", "replay", "quarantine.main.posts.p1.p1"]),
            Command::Quarantine {
                action: Action::Replay {
                    id: Some("quarantine.main.posts.p1.p1".into())
                }
            }
        );
        assert_eq!(
            run(&["quarantine", "drop", "--all"]),
            Command::Quarantine {
                action: Action::Drop {
                    id: None,
                    all: true
                }
            }
        );
        assert_eq!(
            run(&["quarantine", "drop", "x"]),
            Command::Quarantine {
                action: Action::Drop {
                    id: Some("x".into()),
                    all: false
                }
            }
        );
        assert!(misuse(&["quarantine", "drop", "x", "--all"])
            .message
            .contains("--all"));
        assert_eq!(misuse(&["quarantine"]).usage, QUARANTINE_USAGE);
        assert!(misuse(&["quarantine", "purge"]).message.contains("purge"));
        assert_eq!(misuse(&["quarantine", "list", "x"]).usage, LIST_USAGE);
    }

    #[test]
    fn unknown_commands_and_options_are_refused_with_the_usage() {
        let m = misuse(&["bogus"]);
        assert_eq!(m.message, "unrecognized subcommand 'bogus'");
        assert_eq!(
            m.to_string(),
            "error: unrecognized subcommand 'bogus'\n\nUsage: handler [COMMAND]\n\n\
             For more information, try '--help'."
        );
        assert!(misuse(&["--bogus"]).message.contains("--bogus"));
    }

    #[test]
    fn every_level_has_its_help() {
        assert_eq!(help(&["--help"]), HELP);
        assert_eq!(help(&["-h"]), HELP);
        assert_eq!(help(&["help"]), HELP);
        assert_eq!(help(&["verify", "--help"]), VERIFY_HELP);
        assert_eq!(help(&["help", "verify"]), VERIFY_HELP);
        assert_eq!(help(&["backup", "-h"]), BACKUP_HELP);
        assert_eq!(help(&["quarantine", "--help"]), QUARANTINE_HELP);
        assert_eq!(help(&["quarantine", "help", "drop"]), DROP_HELP);
        assert_eq!(help(&["quarantine", "replay", "-h"]), REPLAY_HELP);
        assert_eq!(help(&["quarantine", "list", "--help"]), LIST_HELP);
        assert_eq!(
            help(&["-V"]),
            format!("handler {}\n", env!("CARGO_PKG_VERSION"))
        );
        // Each page names its own usage line.
        for (page, usage) in [
            (HELP, USAGE),
            (VERIFY_HELP, VERIFY_USAGE),
            (BACKUP_HELP, BACKUP_USAGE),
            (QUARANTINE_HELP, QUARANTINE_USAGE),
            (LIST_HELP, LIST_USAGE),
            (REPLAY_HELP, REPLAY_USAGE),
            (DROP_HELP, DROP_USAGE),
        ] {
            assert!(page.contains(&format!("Usage: {usage}\n")), "{usage}");
        }
    }
}
