//! `handler`: settings, telemetry, bind, serve; or an operations command (`blog::ops`).

use blog::settings::Settings;
use blog::startup::Application;

/// See Cargo.toml: mimalloc in the static musl build.
#[cfg(all(target_env = "musl", not(feature = "system-allocator")))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The embedded store runs its SQLite calls on the blocking pool, through one writer and four
/// readers: threads beyond a few dozen would only wait, each costing memory (a stack, an
/// allocator heap). tokio's default allows 512.
const MAX_BLOCKING_THREADS: usize = 32;

fn main() -> std::process::ExitCode {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .max_blocking_threads(MAX_BLOCKING_THREADS)
        .build()
        .expect("the async runtime starts")
        .block_on(run())
}

async fn run() -> std::process::ExitCode {
    // `handler verify …` / `handler backup …`; without a command, serve.
    if let Some(code) = blog::ops::dispatch().await {
        return code;
    }
    let settings = match Settings::from_env() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("handler: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    blog::telemetry::init(settings.log_format);
    let app = match Application::build(&settings).await {
        Ok(app) => app,
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "start-up failed");
            return std::process::ExitCode::FAILURE;
        }
    };
    tracing::info!(
        addr = %app.local_addr(),
        store = app.state().store.kind(),
        hosted = settings.hosted,
        pump = settings.pump,
        auth = settings.auth.mode.as_str(),
        "listening"
    );
    match app.run_until(shutdown_signal()).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "server stopped");
            std::process::ExitCode::FAILURE
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
