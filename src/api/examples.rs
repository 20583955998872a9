//! The examples of the OpenAPI document: one story (ana writes a post, bo comments on it, likes
//! it and follows ana), built with the domain's own constructors and turned into the answers'
//! types as the handlers turn stored items into them (`View::from_domain`), and the request
//! bodies as the handlers' body types. A field added to a view or a body shows in its example
//! without anyone writing it, and an example the server would not accept or answer cannot be
//! built. Only the ids and dates are fixed, so the document is the same on every generation.

use serde::Serialize;
use serde_json::{json, Value};

use super::comments::CommentBody;
use super::conditional::tag_of;
use super::likes::LikeBody;
use super::posts::PostBody;
use super::users::UserBody;
use super::views::{
    ClientConfigView, CommentPage, CommentView, LikePage, LikeView, NegotiatedView,
    PostSummaryPage, PostSummaryView, PostView, TagPage, TagView, UserPage, UserView, View,
};
use crate::auth::Auth;
use crate::domain::{Comment, Id, Like, Post, Text, User, Username};

const ANA: &str = "3f0b7c52-9d1e-4a8f-b6c3-2e5d8a41f907";
const BO: &str = "a7e2d9c4-1b3f-4e6a-8d5c-9f0e2b7a4c13";
const POST: &str = "c91d4e2a-6f7b-4c3d-a8e5-1b2f9d0c7e64";
const COMMENT: &str = "5b8e1f3d-2c7a-4d9e-b6f1-0a3c8e5d2b97";
const CREATED: &str = "2026-11-21T10:00:00.123Z";
const COMMENTED: &str = "2026-11-21T10:05:12.456Z";
const LIKED: &str = "2026-11-21T10:06:30.789Z";

/// The story's values, each of the type the API takes or answers.
pub(super) struct Examples {
    user_body: UserBody,
    user: UserView,
    post_body: PostBody,
    post: PostView,
    summary: PostSummaryView,
    comment_body: CommentBody,
    comment: CommentView,
    like_body: LikeBody,
    like: LikeView,
    follower: UserView,
    config: ClientConfigView,
}

fn id(s: &str) -> Id {
    Id::parse("id", s).expect("an example id is an id")
}

fn text(field: &str, s: &str, max: usize) -> Text {
    Text::parse(field, s, max).expect("an example text is valid")
}

impl Examples {
    pub(super) fn new() -> Self {
        let (ana, bo, post_id) = (id(ANA), id(BO), id(POST));
        let ana_name = Username::parse("ana").expect("a valid name");
        let bo_name = Username::parse("bo").expect("a valid name");
        let mut user = User::new(&ana, &ana_name);
        user.follower_count = 1;
        user.following_count = 0;
        let mut follower = User::new(&bo, &bo_name);
        follower.following_count = 1;

        let title = text("title", "Modelling a blog on Cosmos DB", 200);
        let content = text(
            "content",
            "Every query is one store operation on one partition: the change feed keeps \
             the copies that make it so. This post walks through the containers, the \
             partition keys and what each request reads and writes.",
            20_000,
        );
        let mut post = Post::new(&ana, ana_name.as_str().into(), &title, &content);
        post.id = POST.into();
        post.post_id = POST.into();
        post.creation_date = CREATED.into();
        post.comment_count = 1;
        post.like_count = 1;
        post.tags = crate::domain::tags::parse_tags(&["cosmos-db".into(), "modelling".into()])
            .expect("the example's tags are valid");

        let comment_text = text("content", "Clear and useful, thanks!", 2_000);
        let mut comment = Comment::new(&post_id, &bo, bo_name.as_str().into(), &comment_text);
        comment.id = COMMENT.into();
        comment.creation_date = COMMENTED.into();

        let mut like = Like::new(&post_id, &bo, bo_name.as_str().into());
        like.creation_date = LIKED.into();

        let follower = UserView {
            follower_count: None,
            following_count: None,
            ..UserView::from_domain(follower)
        };
        Examples {
            user_body: UserBody {
                username: ana_name.as_str().into(),
            },
            user: UserView::from_domain(user),
            post_body: PostBody {
                description: None,
                user_id: Some(ANA.into()),
                title: post.title.clone(),
                content: post.content.clone(),
                tags: Some(post.tags.clone()),
            },
            summary: PostSummaryView::from_domain(post.summary()),
            post: PostView::from_domain(post),
            comment_body: CommentBody {
                user_id: Some(BO.into()),
                content: comment.content.clone(),
            },
            comment: CommentView::from_domain(comment),
            like_body: LikeBody {
                user_id: Some(BO.into()),
            },
            like: LikeView::from_domain(like),
            follower,
            config: Auth::none().client_config().into(),
        }
    }

    /// The example of the schema `name` (a component of the document), if it has one.
    pub(super) fn of_schema(&self, name: &str) -> Option<Value> {
        let value = match name {
            "UserBody" => to_value(&self.user_body),
            "User" => to_value(&self.user),
            "PostBody" => to_value(&self.post_body),
            "Post" => to_value(&self.post),
            "PostSummary" => to_value(&self.summary),
            "CommentBody" => to_value(&self.comment_body),
            "Comment" => to_value(&self.comment),
            "LikeBody" => to_value(&self.like_body),
            "Like" => to_value(&self.like),
            "ClientConfig" => to_value(&self.config),
            "Negotiated" => to_value(&NegotiatedView {
                url: "wss://blog.webpubsub.azure.com/client/hubs/live?access_token=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJibG9nIn0.c2lnbmF0dXJl".into(),
            }),
            "UserPage" => to_value(&UserPage {
                items: vec![self.follower.clone()],
                continuation_token: None,
            }),
            "PostSummaryPage" => to_value(&PostSummaryPage {
                items: vec![self.summary.clone()],
                continuation_token: None,
            }),
            "CommentPage" => to_value(&CommentPage {
                items: vec![self.comment.clone()],
                continuation_token: None,
            }),
            "LikePage" => to_value(&LikePage {
                items: vec![self.like.clone()],
                continuation_token: None,
            }),
            "Tag" => to_value(&self.tag()),
            "TagPage" => to_value(&TagPage {
                items: vec![self.tag()],
                continuation_token: None,
            }),
            _ => return None,
        };
        Some(value)
    }

    /// The example post's first tag, on it alone.
    fn tag(&self) -> TagView {
        TagView {
            tag: self.post.tags[0].clone(),
            post_count: 1,
        }
    }

    /// The example of the parameter `name` of an operation on `path`; `etag_of` is the example
    /// the operation answers, whose `ETag` the conditional headers name.
    pub(super) fn of_parameter(
        &self,
        name: &str,
        path: &str,
        etag_of: Option<&Value>,
    ) -> Option<Value> {
        // bo likes ana's post and follows ana.
        let acting = path.contains("/likes/") || path.contains("/following/");
        Some(match name {
            "userId" if acting => json!(BO),
            "userId" => json!(ANA),
            "postId" => json!(POST),
            "commentId" => json!(COMMENT),
            "followeeId" => json!(ANA),
            "limit" => json!(20),
            // Words of the example post's title and content.
            "q" => json!("cosmos partition"),
            // The example post's first tag.
            "tag" => json!(self.post.tags[0]),
            // bo's timeline and ana's post.
            "topics" => json!(format!("timeline:{BO},post:{POST}")),
            "If-None-Match" | "If-Match" => {
                let body = serde_json::to_vec(etag_of?).expect("examples serialize");
                json!(tag_of(&body))
            }
            _ => return None,
        })
    }
}

fn to_value(v: &impl Serialize) -> Value {
    serde_json::to_value(v).expect("examples serialize")
}
