//! Wall time per phase of a run.

use std::time::Instant;

use crate::results::Phase;

/// Wall time per phase of the run, logged as each ends.
pub struct Phases {
    last: Instant,
    pub list: Vec<Phase>,
}

impl Phases {
    pub fn new() -> Self {
        Phases {
            last: Instant::now(),
            list: Vec::new(),
        }
    }

    pub fn done(&mut self, name: &'static str) {
        let seconds = self.last.elapsed().as_secs_f64();
        self.last = Instant::now();
        eprintln!("bench: {name} took {seconds:.1} s");
        self.list.push(Phase { name, seconds });
    }
}
