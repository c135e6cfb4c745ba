//! FS-01..23: the observation policy at the level of its hook points.

use std::cell::Cell;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use dsh_core::AgentId;
use dsh_tool_fs::codes::{FS_NOT_FOUND, FS_NOT_OBSERVED};
use dsh_tool_fs::{
    EditCondition, FsContext, FsHooks, FsSessions, IntentQuery, Observation, ObservationPolicy,
    ObservedEvent, WriteCondition,
};
use serde_json::json;

use super::common::{Env, SESSION, v};

fn q(owner: Option<&str>, path: &str) -> IntentQuery {
    IntentQuery {
        owner: owner.map(Arc::from),
        path: PathBuf::from(path),
    }
}

fn code(d: &dsh_tool_fs::EditDecision) -> Option<String> {
    d.as_ref().err().and_then(|f| f.code()).map(str::to_owned)
}

#[test]
fn fs_01_policy_exposes_only_listeners() {
    let hooks = FsHooks::new();
    assert!(hooks.write_intent().is_empty() && hooks.edit_intent().is_empty());
    assert!(hooks.observed().is_empty());
    let policy = ObservationPolicy::mount(&hooks);
    assert_eq!(hooks.write_intent().len(), 1);
    assert_eq!(hooks.edit_intent().len(), 1);
    assert_eq!(hooks.observed().len(), 1);
    policy.unload();
    assert!(hooks.write_intent().is_empty() && hooks.edit_intent().is_empty());
    assert!(hooks.observed().is_empty());
}

#[test]
fn fs_02_mounts_in_an_empty_context_and_answers_create_if_absent() {
    let hooks = FsHooks::new();
    let _p = ObservationPolicy::mount(&hooks);
    assert_eq!(
        hooks.decide_write(&q(None, "/w/a.txt")),
        Ok(WriteCondition::CreateIfAbsent)
    );
}

#[test]
fn fs_03_unobserved_owner_may_only_create() {
    let hooks = FsHooks::new();
    let _p = ObservationPolicy::mount(&hooks);
    assert_eq!(
        hooks.decide_write(&q(Some("s"), "/w/a.txt")),
        Ok(WriteCondition::CreateIfAbsent)
    );
}

#[test]
fn fs_04_no_actor_or_actor_without_agent_may_only_create() {
    let hooks = FsHooks::new();
    let _p = ObservationPolicy::mount(&hooks);
    // No actor at all.
    assert_eq!(
        hooks.decide_write(&q(None, "/w/a")),
        Ok(WriteCondition::CreateIfAbsent)
    );
    // A call without an agent gets the default context; with no session it has no owner.
    let sessions = FsSessions::new(FsContext::anonymous("/w"));
    let owner = sessions.context_for(None).session_id;
    assert_eq!(owner, None);
    let query = IntentQuery {
        owner,
        path: PathBuf::from("/w/a"),
    };
    assert_eq!(
        hooks.decide_write(&query),
        Ok(WriteCondition::CreateIfAbsent)
    );
}

#[test]
fn fs_05_agent_without_session_has_no_owner() {
    let hooks = FsHooks::new();
    let policy = ObservationPolicy::mount(&hooks);
    policy.record("s", &PathBuf::from("/w/a"), Observation::Present(v(1)));
    let sessions = FsSessions::new(FsContext::new("s", "/w"));
    let agent = AgentId::from("worker");
    sessions.bind(agent.clone(), FsContext::anonymous("/w"));
    let owner = sessions.context_for(Some(&agent)).session_id;
    assert_eq!(owner, None);
    let query = IntentQuery {
        owner,
        path: PathBuf::from("/w/a"),
    };
    assert_eq!(
        hooks.decide_write(&query),
        Ok(WriteCondition::CreateIfAbsent)
    );
}

#[test]
fn fs_06_observed_present_gives_replace_if_version() {
    let hooks = FsHooks::new();
    let policy = ObservationPolicy::mount(&hooks);
    policy.record("s", &PathBuf::from("/w/a"), Observation::Present(v(7)));
    assert_eq!(
        hooks.decide_write(&q(Some("s"), "/w/a")),
        Ok(WriteCondition::ReplaceIfVersion(v(7)))
    );
}

#[test]
fn fs_07_observed_absent_gives_create_if_absent() {
    let hooks = FsHooks::new();
    let policy = ObservationPolicy::mount(&hooks);
    policy.record("s", &PathBuf::from("/w/a"), Observation::Absent);
    assert_eq!(
        hooks.decide_write(&q(Some("s"), "/w/a")),
        Ok(WriteCondition::CreateIfAbsent)
    );
}

#[test]
fn fs_08_edit_of_unobserved_target_is_not_observed() {
    let hooks = FsHooks::new();
    let _p = ObservationPolicy::mount(&hooks);
    let d = hooks.decide_edit(&q(Some("s"), "/w/a"));
    assert_eq!(code(&d).as_deref(), Some(FS_NOT_OBSERVED));
    assert!(
        d.unwrap_err()
            .message()
            .contains("edit requires reading \"/w/a\" first")
    );
}

#[test]
fn fs_09_edit_with_no_actor_is_not_observed() {
    let hooks = FsHooks::new();
    let policy = ObservationPolicy::mount(&hooks);
    policy.record("s", &PathBuf::from("/w/a"), Observation::Present(v(1)));
    let d = hooks.decide_edit(&q(None, "/w/a"));
    assert_eq!(code(&d).as_deref(), Some(FS_NOT_OBSERVED));
}

#[test]
fn fs_10_edit_by_agent_without_session_is_not_observed() {
    let hooks = FsHooks::new();
    let _p = ObservationPolicy::mount(&hooks);
    let sessions = FsSessions::new(FsContext::new("s", "/w"));
    sessions.bind(AgentId::from("a"), FsContext::anonymous("/w"));
    let query = IntentQuery {
        owner: sessions.context_for(Some(&AgentId::from("a"))).session_id,
        path: PathBuf::from("/w/a"),
    };
    assert_eq!(
        code(&hooks.decide_edit(&query)).as_deref(),
        Some(FS_NOT_OBSERVED)
    );
}

#[test]
fn fs_11_edit_basis_is_the_observed_version() {
    let hooks = FsHooks::new();
    let policy = ObservationPolicy::mount(&hooks);
    policy.record("s", &PathBuf::from("/w/a"), Observation::Present(v(3)));
    assert_eq!(
        hooks.decide_edit(&q(Some("s"), "/w/a")),
        Ok(EditCondition::IfVersion(v(3)))
    );
}

#[test]
fn fs_12_edit_of_known_absent_is_not_found() {
    let hooks = FsHooks::new();
    let policy = ObservationPolicy::mount(&hooks);
    policy.record("s", &PathBuf::from("/w/a"), Observation::Absent);
    assert_eq!(
        code(&hooks.decide_edit(&q(Some("s"), "/w/a"))).as_deref(),
        Some(FS_NOT_FOUND)
    );
}

#[tokio::test]
async fn fs_13_a_read_records_present_version() {
    let (env, _p) = Env::with_policy();
    let path = env.put("a.txt", "alpha\n");
    let read = env.call("read", json!({"file_path": "a.txt"})).await.ok();
    let v0 = read.version();
    assert_eq!(
        env.tools
            .hooks()
            .decide_write(&q(Some(SESSION), path.to_str().unwrap())),
        Ok(WriteCondition::ReplaceIfVersion(v0))
    );
}

#[tokio::test]
async fn fs_14_own_writes_and_edits_refresh_the_basis() {
    let (env, _p) = Env::with_policy();
    let path = env.path("new.txt");
    let created = env
        .call("write", json!({"file_path": "new.txt", "content": "one\n"}))
        .await
        .ok();
    let v1 = created.version();
    let query = q(Some(SESSION), path.to_str().unwrap());
    assert_eq!(
        env.tools.hooks().decide_edit(&query),
        Ok(EditCondition::IfVersion(v1))
    );
    let edited = env
        .call(
            "edit",
            json!({"file_path": "new.txt", "old_string": "one", "new_string": "two"}),
        )
        .await
        .ok();
    let v2 = edited.version();
    assert_ne!(v1, v2);
    assert_eq!(
        env.tools.hooks().decide_edit(&query),
        Ok(EditCondition::IfVersion(v2))
    );
}

#[test]
fn fs_15_observation_without_owner_records_nothing() {
    let hooks = FsHooks::new();
    let policy = ObservationPolicy::mount(&hooks);
    hooks
        .observed()
        .emit(&ObservedEvent {
            owner: None,
            path: PathBuf::from("/w/a"),
            observation: Observation::Present(v(1)),
        })
        .unwrap();
    assert_eq!(policy.observation("s", &PathBuf::from("/w/a")), None);
    assert_eq!(
        code(&hooks.decide_edit(&q(Some("s"), "/w/a"))).as_deref(),
        Some(FS_NOT_OBSERVED)
    );
}

#[test]
fn fs_16_present_absent_present_sequence() {
    let hooks = FsHooks::new();
    let _p = ObservationPolicy::mount(&hooks);
    let see = |o| {
        hooks
            .observed()
            .emit(&ObservedEvent {
                owner: Some(Arc::from("s")),
                path: PathBuf::from("/w/a"),
                observation: o,
            })
            .unwrap()
    };
    let query = q(Some("s"), "/w/a");
    see(Observation::Present(v(1)));
    assert_eq!(
        hooks.decide_write(&query),
        Ok(WriteCondition::ReplaceIfVersion(v(1)))
    );
    see(Observation::Absent);
    assert_eq!(
        hooks.decide_write(&query),
        Ok(WriteCondition::CreateIfAbsent)
    );
    assert_eq!(
        code(&hooks.decide_edit(&query)).as_deref(),
        Some(FS_NOT_FOUND)
    );
    see(Observation::Present(v(2)));
    assert_eq!(
        hooks.decide_edit(&query),
        Ok(EditCondition::IfVersion(v(2)))
    );
}

#[test]
fn fs_17_observations_are_per_session() {
    let hooks = FsHooks::new();
    let policy = ObservationPolicy::mount(&hooks);
    policy.record("A", &PathBuf::from("/w/a"), Observation::Present(v(0)));
    assert_eq!(
        code(&hooks.decide_edit(&q(Some("B"), "/w/a"))).as_deref(),
        Some(FS_NOT_OBSERVED)
    );
    assert_eq!(
        hooks.decide_edit(&q(Some("A"), "/w/a")),
        Ok(EditCondition::IfVersion(v(0)))
    );
}

#[test]
fn fs_18_write_intents_are_per_session() {
    let hooks = FsHooks::new();
    let policy = ObservationPolicy::mount(&hooks);
    policy.record("A", &PathBuf::from("/w/a"), Observation::Present(v(0)));
    assert_eq!(
        hooks.decide_write(&q(Some("B"), "/w/a")),
        Ok(WriteCondition::CreateIfAbsent)
    );
    assert_eq!(
        hooks.decide_write(&q(Some("A"), "/w/a")),
        Ok(WriteCondition::ReplaceIfVersion(v(0)))
    );
}

#[test]
fn fs_19_policy_decides_without_invoking_the_default() {
    let hooks = FsHooks::new();
    let _p = ObservationPolicy::mount(&hooks);
    let called = Cell::new(false);
    let w = hooks.write_intent().decide(&q(Some("s"), "/w/a"), &|_| {
        called.set(true);
        Ok(WriteCondition::Unconditional)
    });
    assert_eq!(w, Ok(WriteCondition::CreateIfAbsent));
    let e = hooks.edit_intent().decide(&q(Some("s"), "/w/a"), &|_| {
        called.set(true);
        Ok(EditCondition::Unconditional)
    });
    assert!(e.is_err());
    assert!(!called.get(), "the default thunk ran");
}

#[test]
fn fs_20_a_later_edit_decider_never_runs() {
    let hooks = FsHooks::new();
    let policy = ObservationPolicy::mount(&hooks);
    policy.record("s", &PathBuf::from("/w/a"), Observation::Present(v(4)));
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    let _later = hooks.edit_intent().on(move |_, _| {
        r.fetch_add(1, Ordering::SeqCst);
        Ok(EditCondition::Unconditional)
    });
    assert_eq!(
        hooks.decide_edit(&q(Some("s"), "/w/a")),
        Ok(EditCondition::IfVersion(v(4)))
    );
    assert!(hooks.decide_edit(&q(Some("t"), "/w/a")).is_err());
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    // One prepended in front of the policy does win (first decider owns the answer).
    let _front = hooks
        .edit_intent()
        .prepend(|_, _| Ok(EditCondition::Unconditional));
    assert_eq!(
        hooks.decide_edit(&q(Some("t"), "/w/a")),
        Ok(EditCondition::Unconditional)
    );
}

#[test]
fn fs_21_a_later_write_decider_never_runs() {
    let hooks = FsHooks::new();
    let _p = ObservationPolicy::mount(&hooks);
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    let _later = hooks.write_intent().on(move |_, _| {
        r.fetch_add(1, Ordering::SeqCst);
        Ok(WriteCondition::Unconditional)
    });
    assert_eq!(
        hooks.decide_write(&q(Some("s"), "/w/a")),
        Ok(WriteCondition::CreateIfAbsent)
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn fs_22_unload_releases_state() {
    let (env, policy) = Env::with_policy();
    env.put("a.txt", "x\n");
    env.call("read", json!({"file_path": "a.txt"})).await.ok();
    env.call(
        "edit",
        json!({"file_path": "a.txt", "old_string": "x", "new_string": "y"}),
    )
    .await
    .ok();
    policy.unload();
    let _reloaded = env.tools.mount_policy();
    let again = env
        .call(
            "edit",
            json!({"file_path": "a.txt", "old_string": "y", "new_string": "z"}),
        )
        .await
        .err(FS_NOT_OBSERVED);
    assert!(again.text().contains("read the file, then retry"));
    assert_eq!(env.get("a.txt"), "y\n");
}

#[test]
fn fs_23_after_unload_write_intent_falls_through_to_the_default() {
    let hooks = FsHooks::new();
    let policy = ObservationPolicy::mount(&hooks);
    assert_eq!(
        hooks.decide_write(&q(Some("s"), "/w/a")),
        Ok(WriteCondition::CreateIfAbsent)
    );
    policy.unload();
    assert_eq!(
        hooks.decide_write(&q(Some("s"), "/w/a")),
        Ok(WriteCondition::Unconditional)
    );
    assert_eq!(
        hooks.decide_edit(&q(Some("s"), "/w/a")),
        Ok(EditCondition::Unconditional)
    );
}

#[tokio::test]
async fn a_panicking_intent_listener_refuses_the_mutation() {
    let env = Env::new();
    env.put("a.txt", "keep\n");
    let _w = env
        .tools
        .hooks()
        .write_intent()
        .on(|_, _| panic!("write policy exploded"));
    let _e = env
        .tools
        .hooks()
        .edit_intent()
        .on(|_, _| panic!("edit policy exploded"));
    let w = env
        .call("write", json!({"file_path": "a.txt", "content": "lost"}))
        .await;
    assert!(w.is_error());
    assert!(w.text().contains("fs/write-intent"), "{}", w.text());
    assert!(w.text().contains("write policy exploded"));
    let e = env
        .call(
            "edit",
            json!({"file_path": "a.txt", "old_string": "keep", "new_string": "lost"}),
        )
        .await;
    assert!(e.is_error());
    assert!(e.text().contains("edit policy exploded"));
    assert_eq!(env.get("a.txt"), "keep\n");
}

#[tokio::test]
async fn any_listener_may_refuse_a_write() {
    let env = Env::new();
    let _ro = env.tools.hooks().write_intent().on(|q, _| {
        Err(dsh_core::Failure::new(format!(
            "{} is read-only",
            q.path.display()
        )))
    });
    let out = env
        .call("write", json!({"file_path": "x.txt", "content": "x"}))
        .await;
    assert!(out.text().ends_with("x.txt is read-only"), "{}", out.text());
    assert!(!env.path("x.txt").exists());
}
