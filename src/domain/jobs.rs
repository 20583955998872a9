//! Job items: where a projection's work that takes more than one step stands (a post's fan-out
//! to its author's followers or bookmarkers, a rename's, an erasure's, a deleted post's entries
//! going, an author crossing the fan-out limit, the move of timeline items). Internal items of
//! `users`, in the partition of the user the work is for: each step writes the item again, and
//! its change, coming back through the users feed, brings the next step.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `type` of a job item. The name is the timeline lane's, whose jobs came first; stored items
/// carry it.
pub const JOB: &str = "timelineJob";

/// A job item as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Job {
    /// [`Work::id`]: one item per piece of work.
    pub id: String,
    #[serde(rename = "type")]
    kind: JobType,
    /// The partition: the user the work is for.
    pub user_id: String,
    /// What the work is, and where it stands.
    #[serde(flatten)]
    pub work: Work,
    /// Steps taken so far (a job that takes many is one to look at).
    #[serde(default)]
    pub steps: u64,
    /// Nothing left to do: a change of the item brings no step.
    #[serde(default)]
    pub done: bool,
    /// The version read, to replace the item only if no one else moved it on meanwhile.
    #[serde(rename = "_etag", default, skip_serializing)]
    pub etag: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
enum JobType {
    #[serde(rename = "timelineJob")]
    Job,
}

/// The kinds of work, stored as `job` beside the kind's own fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "job", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum Work {
    /// Post `post_id`'s timeline entry (`entry`: what every copy holds, as
    /// `follows::entry_content` makes it) copied to its author's followers, a page a step.
    Post {
        post_id: String,
        entry: Value,
        #[serde(default)]
        cursor: Option<String>,
    },
    /// Deleted post `post_id`'s timeline entries deleted, a page a step.
    Delete { post_id: String },
    /// The user's name carried to the edges and timeline entries that name them: rename
    /// `renaming` under way, `version` the last one done.
    Rename {
        #[serde(default)]
        version: u64,
        #[serde(default)]
        renaming: u64,
        #[serde(default)]
        username: String,
    },
    /// The author's side of the fan-out limit: `merged` (their posts read into timelines, not
    /// copied), and a crossing under way to side `target`, whose next page of followers starts
    /// at `cursor`.
    Limit {
        #[serde(default)]
        merged: bool,
        #[serde(default)]
        target: Option<bool>,
        #[serde(default)]
        cursor: Option<String>,
    },
    /// An erased user's own timeline going, a page a step.
    Erase,
    /// Timeline items an earlier release kept in `users` moved to `timelines`: `moved` so far.
    Move {
        #[serde(default)]
        moved: u64,
    },
    /// Post `post_id`'s bookmark copies (`entry`: the post as a copy shows it) rewritten, a page
    /// of bookmarkers a step.
    Bookmarks {
        post_id: String,
        entry: Value,
        #[serde(default)]
        cursor: Option<String>,
    },
}

/// The job item of a user's rename.
pub const RENAME_JOB: &str = "timelineJob-rename";
/// The job item of a user's side of the fan-out limit.
pub const LIMIT_JOB: &str = "timelineJob-limit";
/// The job item of an erased user's timeline going.
pub const ERASE_JOB: &str = "timelineJob-erase";
/// The job item of the move of timeline items.
pub const MOVE_JOB: &str = "timelineJob-move";

/// The job item of post `post_id`'s fan-out to its author's followers.
pub fn post_job_id(post_id: &str) -> String {
    format!("{JOB}-post-{post_id}")
}

/// The job item of deleted post `post_id`'s entries going.
pub fn delete_job_id(post_id: &str) -> String {
    format!("{JOB}-delete-{post_id}")
}

/// The job item of post `post_id`'s bookmark copies.
pub fn bookmarks_job_id(post_id: &str) -> String {
    format!("{JOB}-bookmarks-{post_id}")
}

impl Work {
    /// The id of this work's item: one per post for a post's work, one per user otherwise.
    pub fn id(&self) -> String {
        match self {
            Work::Post { post_id, .. } => post_job_id(post_id),
            Work::Delete { post_id } => delete_job_id(post_id),
            Work::Bookmarks { post_id, .. } => bookmarks_job_id(post_id),
            Work::Rename { .. } => RENAME_JOB.into(),
            Work::Limit { .. } => LIMIT_JOB.into(),
            Work::Erase => ERASE_JOB.into(),
            Work::Move { .. } => MOVE_JOB.into(),
        }
    }

    /// The copy a post's fan-out writes, for a post's work.
    pub fn entry(&self) -> Option<&Value> {
        match self {
            Work::Post { entry, .. } | Work::Bookmarks { entry, .. } => Some(entry),
            _ => None,
        }
    }

    /// A post's fan-out: its post, the copy every owner gets, and where its next page starts.
    pub fn fanout(&self) -> Option<(&str, &Value, Option<&str>)> {
        match self {
            Work::Post {
                post_id,
                entry,
                cursor,
            }
            | Work::Bookmarks {
                post_id,
                entry,
                cursor,
            } => Some((post_id, entry, cursor.as_deref())),
            _ => None,
        }
    }
}

impl Job {
    /// Work `work` for user `user_id`, after `steps` steps; `done` when nothing is left.
    pub fn new(user_id: &str, work: Work, steps: u64, done: bool) -> Job {
        Job {
            id: work.id(),
            kind: JobType::Job,
            user_id: user_id.into(),
            work,
            steps,
            done,
            etag: None,
        }
    }

    /// A stored item as a job item, or why it does not read as one.
    pub fn read(item: &Value) -> Result<Job, String> {
        Job::deserialize(item).map_err(|e| format!("a job item does not read: {e}"))
    }

    /// Whether a stored item is a job item (of any kind, readable or not).
    pub fn is_job(item: &Value) -> bool {
        super::Meta::of(item).kind == Some(JOB)
    }

    pub fn to_item(&self) -> Value {
        super::value::to_value(self)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Items written before the kinds were typed read as the same work, and write back the
    /// same fields.
    #[test]
    fn stored_job_items_read_and_write_back_as_they_were() {
        let stored = [
            json!({"id": "timelineJob-post-p1", "type": "timelineJob", "userId": "u1",
                   "job": "post", "postId": "p1", "entry": {"title": "t"}, "cursor": "c",
                   "steps": 5, "done": false}),
            json!({"id": "timelineJob-delete-p1", "type": "timelineJob", "userId": "u1",
                   "job": "delete", "postId": "p1", "steps": 3, "done": false}),
            json!({"id": "timelineJob-rename", "type": "timelineJob", "userId": "u1",
                   "job": "rename", "version": 1, "renaming": 2, "username": "ana", "steps": 1,
                   "done": false}),
            json!({"id": "timelineJob-limit", "type": "timelineJob", "userId": "u1",
                   "job": "limit", "merged": true, "target": false, "cursor": null,
                   "steps": 0, "done": false}),
            json!({"id": "timelineJob-erase", "type": "timelineJob", "userId": "u1",
                   "job": "erase", "steps": 4, "done": false}),
            json!({"id": "timelineJob-move", "type": "timelineJob", "userId": "store.move",
                   "job": "move", "steps": 2, "moved": 400, "done": false}),
            json!({"id": "timelineJob-bookmarks-p1", "type": "timelineJob", "userId": "u1",
                   "job": "bookmarks", "postId": "p1", "entry": {"title": "t"}, "cursor": null,
                   "steps": 0, "done": true}),
        ];
        for item in stored {
            let job = Job::read(&item).unwrap();
            assert_eq!(job.id, job.work.id(), "{item}");
            assert_eq!(job.to_item(), item);
        }
    }

    /// Fields an item was written without read as their defaults; its version is read but
    /// never written.
    #[test]
    fn missing_fields_read_as_defaults_and_the_version_is_not_written() {
        let item = json!({"id": "timelineJob-limit", "type": "timelineJob", "userId": "u1",
                          "job": "limit", "merged": true, "done": true, "_etag": "e1"});
        let job = Job::read(&item).unwrap();
        let want = Work::Limit {
            merged: true,
            target: None,
            cursor: None,
        };
        assert_eq!(
            (&job.work, job.steps, job.etag.as_deref()),
            (&want, 0, Some("e1"))
        );
        assert!(job.to_item().get("_etag").is_none());
        assert!(
            Job::read(&json!({"id": "x", "type": "timelineJob", "userId": "u1",
                                  "job": "unknown"}))
            .is_err()
        );
        assert!(
            Job::read(&json!({"id": "x", "type": "post", "userId": "u1", "job": "erase"})).is_err()
        );
    }
}
