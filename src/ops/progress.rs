//! A progress line on a terminal (stderr), nothing anywhere else: logs and reports stay clean
//! when the output is captured. The line (`⠂ posts: 1200 [3s]`: a spinner, the stage, the count
//! so far, the seconds since the start) is redrawn every 120 ms by a thread of its own, and
//! cleared when the work is done.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often the line is redrawn.
const TICK: Duration = Duration::from_millis(120);
/// The spinner's frames, one a tick.
const FRAMES: [char; 8] = ['⠁', '⠂', '⠄', '⡀', '⢀', '⠠', '⠐', '⠈'];
/// Back to the line's start and erase it.
const CLEAR: &str = "\r\x1b[2K";

pub struct Progress(Option<Line>);

/// A line being drawn: what it shows, and how to stop the thread that draws it.
struct Line {
    shown: Arc<Shown>,
    drawer: Mutex<Option<(Sender<()>, JoinHandle<()>)>>,
}

#[derive(Default)]
struct Shown {
    stage: Mutex<&'static str>,
    count: AtomicU64,
}

impl Progress {
    /// A spinner with a count when stderr is a terminal; silent otherwise.
    pub fn for_terminal() -> Self {
        if !std::io::stderr().is_terminal() {
            return Self::hidden();
        }
        Self::drawn_to(std::io::stderr())
    }

    pub fn hidden() -> Self {
        Progress(None)
    }

    /// A line drawn to `out` until [`Progress::finish`] (or until dropped).
    fn drawn_to(mut out: impl Write + Send + 'static) -> Self {
        let shown = Arc::new(Shown::default());
        let (stop, stopped) = mpsc::channel::<()>();
        let drawer = {
            let shown = shown.clone();
            std::thread::spawn(move || {
                let started = Instant::now();
                for frame in FRAMES.iter().cycle() {
                    let stage = *shown.stage.lock().unwrap_or_else(PoisonError::into_inner);
                    let count = shown.count.load(Ordering::Relaxed);
                    let line = render(*frame, stage, count, started.elapsed());
                    let _ = write!(out, "{CLEAR}{line}");
                    let _ = out.flush();
                    // Ends when `finish` drops the sender (or sends).
                    if stopped.recv_timeout(TICK) != Err(RecvTimeoutError::Timeout) {
                        break;
                    }
                }
                let _ = write!(out, "{CLEAR}");
                let _ = out.flush();
            })
        };
        Progress(Some(Line {
            shown,
            drawer: Mutex::new(Some((stop, drawer))),
        }))
    }

    /// Start counting a new stage (`posts`, `users`, …).
    pub fn stage(&self, name: &'static str) {
        if let Some(l) = &self.0 {
            *l.shown.stage.lock().unwrap_or_else(PoisonError::into_inner) = name;
            l.shown.count.store(0, Ordering::Relaxed);
        }
    }

    pub fn inc(&self, n: u64) {
        if let Some(l) = &self.0 {
            l.shown.count.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Clear the line and stop drawing it.
    pub fn finish(&self) {
        if let Some(l) = &self.0 {
            l.stop();
        }
    }
}

impl Line {
    fn stop(&self) {
        let drawer = self
            .drawer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some((stop, thread)) = drawer {
            drop(stop);
            let _ = thread.join();
        }
    }
}

impl Drop for Line {
    fn drop(&mut self) {
        self.stop();
    }
}

fn render(frame: char, stage: &str, count: u64, elapsed: Duration) -> String {
    format!("{frame} {stage}: {count} [{}s]", elapsed.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer whose bytes the test can read while the drawer holds its own handle.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn the_line_shows_the_stage_count_and_seconds() {
        assert_eq!(
            render('⠂', "posts", 1200, Duration::from_millis(3400)),
            "⠂ posts: 1200 [3s]"
        );
    }

    #[test]
    fn finishing_stops_the_drawing_and_leaves_the_line_clear() {
        let out = Shared::default();
        let progress = Progress::drawn_to(out.clone());
        progress.stage("posts");
        progress.inc(2);
        progress.finish();
        let written = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        assert!(written.starts_with(CLEAR), "{written:?}");
        assert!(written.ends_with(CLEAR), "{written:?}");
        // Nothing more is drawn once finished (the thread has ended), and finishing again or
        // dropping is harmless.
        let len = written.len();
        progress.finish();
        drop(progress);
        assert_eq!(out.0.lock().unwrap().len(), len);
    }
}
