//! Every relative link of the repository's Markdown (the README, `docs/`, the other `.md`
//! files it tracks) names a file or folder that exists, resolved from the linking file's own
//! folder, as GitHub and every Markdown viewer resolve it.

use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The Markdown files: the top level's and everything under `docs/`.
fn pages() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for dir in [repo(), repo().join("docs")] {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The targets of the inline links `[text](target)` of `text` outside code, without their
/// `#anchor` or title; links to other sites and anchors of the same page left out.
fn relative_links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Code spans hold examples, not links.
        let prose: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
        let mut rest = prose.as_str();
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let end = rest.find(')').unwrap_or(rest.len());
            let target = rest[..end].split_whitespace().next().unwrap_or("");
            let path = target.split('#').next().unwrap_or("");
            if !path.is_empty() && !path.contains("://") && !path.starts_with("mailto:") {
                out.push(path.to_string());
            }
            rest = &rest[end..];
        }
    }
    out
}

fn broken(page: &Path, text: &str) -> Vec<String> {
    let dir = page.parent().unwrap();
    relative_links(text)
        .into_iter()
        .filter(|target| !dir.join(target).exists())
        .map(|target| {
            let name = page.strip_prefix(repo()).unwrap_or(page).display();
            format!("{name}: ({target}) names nothing")
        })
        .collect()
}

#[test]
fn every_relative_link_of_the_docs_names_a_file() {
    let pages = pages();
    assert!(pages.len() > 10, "{pages:?}");
    let broken: Vec<String> = pages
        .iter()
        .flat_map(|p| broken(p, &std::fs::read_to_string(p).unwrap()))
        .collect();
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

/// The check above finds a link from `docs/` written as if from the top level, and passes the
/// same link written from where it is, an anchor, another site and a code span.
#[test]
fn a_planted_broken_link_is_found() {
    let page = repo().join("docs").join("settings.md");
    let wrong = "see [the timeline](docs/timeline.md#limits)";
    assert_eq!(broken(&page, wrong).len(), 1);
    let right = "see [the timeline](timeline.md#limits), [above](#x), \
                 [Azure](https://learn.microsoft.com/azure) and `[a](b)`";
    assert_eq!(broken(&page, right), Vec::<String>::new());
}
