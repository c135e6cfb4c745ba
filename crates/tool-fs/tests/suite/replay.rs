//! Resume (spec FS3): observations rebuilt from the tool results' meta let a resumed session edit
//! what it read before, and still catch changes made while it was away.

use dsh_tool_fs::codes::{FS_NOT_OBSERVED, FS_STALE_VERSION};
use dsh_tool_fs::{FsContext, FsTools, Observation, observation_from_meta};
use serde_json::{Value, json};

use super::common::{Env, SESSION, run_call};

async fn call(tools: &FsTools, name: &str, args: Value) -> super::common::Outcome {
    let def = tools
        .definitions()
        .unwrap()
        .into_iter()
        .find(|d| d.name() == name)
        .unwrap();
    run_call(&def, args, None, dsh_core::Signal::never()).await
}

#[tokio::test]
async fn observations_rebuilt_from_meta_authorize_edits_after_resume() {
    let (env, _p) = Env::with_policy();
    env.put("a.txt", "one\n");
    env.put("b.txt", "bee\n");
    // The first life of the session: what its log keeps is each result's meta.
    let mut log: Vec<Value> = Vec::new();
    log.push(
        env.call("read", json!({"file_path": "a.txt"}))
            .await
            .ok()
            .meta(),
    );
    log.push(
        env.call(
            "edit",
            json!({"file_path": "a.txt", "old_string": "one", "new_string": "two"}),
        )
        .await
        .ok()
        .meta(),
    );
    log.push(
        env.call("read", json!({"file_path": "b.txt"}))
            .await
            .ok()
            .meta(),
    );

    // A new process: fresh tools and a fresh policy over the same directory.
    let resumed = FsTools::new(env.ws().clone());
    resumed
        .sessions()
        .set_default(FsContext::new(SESSION, env.root.clone()));
    let policy = resumed.mount_policy();
    let before = call(
        &resumed,
        "edit",
        json!({"file_path": "a.txt", "old_string": "two", "new_string": "three"}),
    )
    .await;
    assert_eq!(before.code().as_deref(), Some(FS_NOT_OBSERVED));
    policy.restore(SESSION, log.iter().filter_map(observation_from_meta));
    assert!(matches!(
        policy.observation(SESSION, &env.path("a.txt")),
        Some(Observation::Present(_))
    ));
    call(
        &resumed,
        "edit",
        json!({"file_path": "a.txt", "old_string": "two", "new_string": "three"}),
    )
    .await
    .ok();
    assert_eq!(env.get("a.txt"), "three\n");
    // b.txt changed while the session was away: the restored basis is stale.
    std::fs::write(env.path("b.txt"), "changed\n").unwrap();
    call(
        &resumed,
        "edit",
        json!({"file_path": "b.txt", "old_string": "changed", "new_string": "x"}),
    )
    .await
    .err(FS_STALE_VERSION);
}

#[test]
fn meta_without_observation_gives_nothing() {
    assert_eq!(observation_from_meta(&json!({"diffs": []})), None);
    assert_eq!(
        observation_from_meta(&json!({"observed": {"path": "/a", "version": "garbage"}})),
        None
    );
}
