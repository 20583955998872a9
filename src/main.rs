//! `handler`: an operations command (`blog::ops`), or: settings, start opening the store,
//! telemetry, bind, serve while the store opens (`blog::startup`).

use std::process::ExitCode;

use blog::settings::Settings;
use blog::startup::StoreOpening;
use tokio::net::TcpListener;

/// See Cargo.toml: mimalloc in the static musl build.
#[cfg(all(target_env = "musl", not(feature = "system-allocator")))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The embedded store runs its SQLite calls on the blocking pool, through one writer and four
/// readers: one thread per connection and a few more waiting for one are all it can use. More
/// threads would only wait for the writer, each with a stack and an allocator heap holding SQLite's
/// memory (the bench's hot-post load measures both). tokio's default allows 512.
const MAX_BLOCKING_THREADS: usize = 8;

fn main() -> ExitCode {
    // `handler verify …` / `handler backup …`; without a command, serve.
    if let Some(command) = blog::ops::command() {
        return runtime().block_on(blog::ops::run(command));
    }
    let settings = match Settings::from_env() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("handler: {e}");
            return ExitCode::from(2);
        }
    };
    // Whether the embedded store's file is there before this start: a start that fails leaves
    // no file of its own behind.
    let new_file = blog::startup::new_database_file(&settings);
    // First of all, so that a new database's file and schema are created while the runtime
    // starts, logging is set up, the port is bound and the routes are built.
    let opening = StoreOpening::start(&settings);
    runtime().block_on(serve(settings, opening, new_file))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .max_blocking_threads(MAX_BLOCKING_THREADS)
        .build()
        .expect("the async runtime starts")
}

async fn serve(
    settings: Settings,
    opening: anyhow::Result<StoreOpening>,
    new_file: Option<std::path::PathBuf>,
) -> ExitCode {
    blog::telemetry::init(&settings.log);
    let served = async {
        let opening = opening?;
        let listener = match TcpListener::bind(settings.addr).await {
            Ok(listener) => listener,
            Err(e) => {
                // The store may be creating its file meanwhile: let it finish, then take the file
                // away again, so the failed start leaves nothing behind.
                if let Some(path) = &new_file {
                    drop(opening.finish().await);
                    blog::startup::remove_database_file(path);
                }
                return Err(
                    anyhow::Error::new(e).context(format!("cannot listen on {}", settings.addr))
                );
            }
        };
        // One handler per database file: its pump is the file's only one.
        let store = async {
            let store = opening.finish().await?;
            blog::startup::hold_database_file(&settings)?;
            Ok(store)
        };
        blog::startup::serve(listener, &settings, store, shutdown_signal()).await
    };
    match served.await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "start-up failed");
            ExitCode::FAILURE
        }
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        if let Ok(mut s) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        {
            s.recv().await;
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
}
