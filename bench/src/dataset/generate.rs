//! The dataset's contents, generated from the seed: users, their posts with comments and likes,
//! and the texts and names they carry.

use blog::domain::{self, Comment, Kind, Like, Post};
use rand::seq::index;
use rand::seq::IndexedRandom;
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;

use super::UserRef;

/// Texts and names: a mix of scripts, so the short form is cut in more than ASCII.
const WORDS: &[&str] = &[
    "cosmos",
    "partition",
    "latency",
    "request",
    "unit",
    "feed",
    "post",
    "comment",
    "like",
    "model",
    "query",
    "index",
    "container",
    "item",
    "change",
    "denormalize",
    "copy",
    "scale",
    "throughput",
    "the",
    "a",
    "of",
    "and",
    "to",
    "in",
    "is",
    "that",
    "for",
    "on",
    "with",
    "data",
    "write",
    "read",
    "fast",
    "cheap",
    "user",
    "blog",
    "café",
    "naïve",
    "über",
    "Grüße",
    "façade",
    "日本語",
    "データ",
    "блог",
    "данные",
    "δεδομένα",
    "مدونة",
    "ब्लॉग",
    "🙂",
    "👩‍💻",
];
const NAMES: &[&str] = &[
    "ana",
    "ben",
    "chloé",
    "dmitri",
    "eun-ji",
    "fatima",
    "gao",
    "hana",
    "ivan",
    "jürgen",
    "kofi",
    "lucía",
    "mei",
    "noor",
    "olaf",
    "priya",
    "quinn",
    "raúl",
    "sven",
    "tomás",
    "uma",
    "vera",
    "wei",
    "xóchitl",
    "yuki",
    "zoë",
    "łukasz",
    "ανδρέας",
    "мария",
    "明",
];

fn new_id(rng: &mut Pcg64) -> String {
    uuid::Builder::from_random_bytes(rng.random())
        .into_uuid()
        .to_string()
}

fn words(rng: &mut Pcg64, min_chars: usize, max_chars: usize) -> String {
    let target = rng.random_range(min_chars..=max_chars);
    let mut s = String::new();
    while s.chars().count() < target {
        if !s.is_empty() {
            s.push(' ');
        }
        s.push_str(WORDS.choose(rng).expect("words"));
    }
    s
}

fn date(ms: i64) -> String {
    let t = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .expect("a date in range");
    domain::format_time(t)
}

/// Everything in one post's partition.
pub(super) struct PostData {
    pub(super) post: Post,
    pub(super) comments: Vec<Comment>,
    pub(super) likes: Vec<Like>,
}

/// Generates users, then each user's posts with their comments and likes.
pub(super) struct Generator {
    rng: Pcg64,
    pub(super) users: Vec<UserRef>,
    /// Creation dates lie in `[from_ms, to_ms]`.
    from_ms: i64,
    to_ms: i64,
}

impl Generator {
    pub(super) fn new(seed: u64, n_users: usize, now_ms: i64) -> Self {
        let mut rng = Pcg64::seed_from_u64(seed);
        let users = (0..n_users)
            .map(|i| UserRef {
                id: new_id(&mut rng),
                username: format!("{}{}", NAMES.choose(&mut rng).expect("names"), i + 1),
            })
            .collect();
        // A year of history ending a second ago: anything the bench creates is newer.
        let to_ms = now_ms - 1_000;
        Generator {
            rng,
            users,
            from_ms: to_ms - 365 * 24 * 3600 * 1000,
            to_ms,
        }
    }

    pub(super) fn posts_of(&mut self, author: usize) -> Vec<PostData> {
        let n_posts = self.rng.random_range(5..=50);
        let author = self.users[author].clone();
        (0..n_posts)
            .map(|_| {
                let rng = &mut self.rng;
                let post_id = new_id(rng);
                let post_ms = rng.random_range(self.from_ms..=self.to_ms);
                let n_comments = rng.random_range(0..=25usize);
                let comments: Vec<Comment> = (0..n_comments)
                    .map(|_| {
                        let by = self.users.choose(rng).expect("users");
                        Comment {
                            id: new_id(rng),
                            kind: Kind::Comment,
                            post_id: post_id.clone(),
                            user_id: by.id.clone(),
                            user_username: by.username.clone(),
                            content: words(rng, 10, 300),
                            creation_date: date(rng.random_range(post_ms..=self.to_ms)),
                        }
                    })
                    .collect();
                // A like's id is its user's (`like-<userId>`): at most one per user and post.
                let n_likes = rng.random_range(0..=100usize).min(self.users.len());
                let likes: Vec<Like> = index::sample(rng, self.users.len(), n_likes)
                    .into_iter()
                    .map(|i| {
                        let by = &self.users[i];
                        Like {
                            id: Like::id_of(&by.id),
                            kind: Kind::Like,
                            post_id: post_id.clone(),
                            user_id: by.id.clone(),
                            user_username: by.username.clone(),
                            creation_date: date(rng.random_range(post_ms..=self.to_ms)),
                        }
                    })
                    .collect();
                let post = Post {
                    id: post_id.clone(),
                    kind: Kind::Post,
                    post_id,
                    user_id: author.id.clone(),
                    user_username: author.username.clone(),
                    title: words(rng, 10, 80),
                    description: None,
                    content: words(rng, 50, 1500),
                    comment_count: comments.len() as u64,
                    like_count: likes.len() as u64,
                    creation_date: date(post_ms),
                    updated_at: None,
                    bookmark_count: 0,
                    tags: Vec::new(),
                };
                PostData {
                    post,
                    comments,
                    likes,
                }
            })
            .collect()
    }
}

/// Item bodies for a new post, comment or like as a client would send them.
pub fn post_text(rng: &mut Pcg64) -> (String, String) {
    (words(rng, 10, 80), words(rng, 50, 1500))
}

pub fn comment_text(rng: &mut Pcg64) -> String {
    words(rng, 10, 300)
}
