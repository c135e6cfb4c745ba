//! FS-70 and the per-path compare-and-set: concurrent guarded writes with one basis never both
//! apply; writes to different paths do not block each other.

use dsh_tool_fs::codes::{FS_EDIT_NOT_FOUND, FS_STALE_VERSION};
use dsh_tool_fs::{EditCondition, WriteCondition};
use serde_json::json;

use super::common::Env;

/// Both edits take their basis from the one read only when neither has finished before the other
/// decides; a round where one edit finished first (its own result then counts as seen, so the
/// other looks for text that is gone) does not meet the line's premise and is told apart by its
/// code. Rounds run until eight met it; every round, raced or not, applies exactly one edit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fs_70_two_concurrent_edits_with_one_basis_only_one_applies() {
    let (mut raced, mut rounds) = (0, 0);
    while raced < 8 {
        rounds += 1;
        assert!(rounds <= 400, "only {raced} of {rounds} rounds raced");
        let (env, _p) = Env::with_policy();
        env.put("f.txt", "base\n");
        env.call("read", json!({"file_path": "f.txt"})).await.ok();
        let a = env.call(
            "edit",
            json!({"file_path": "f.txt", "old_string": "base", "new_string": "from-a"}),
        );
        let b = env.call(
            "edit",
            json!({"file_path": "f.txt", "old_string": "base", "new_string": "from-b"}),
        );
        let (a, b) = tokio::join!(a, b);
        let oks = [&a, &b].iter().filter(|o| !o.is_error()).count();
        assert_eq!(oks, 1, "round {rounds}: {:?} / {:?}", a.text(), b.text());
        let loser = if a.is_error() { &a } else { &b };
        match loser.code().as_deref() {
            Some(FS_STALE_VERSION) => raced += 1,
            Some(FS_EDIT_NOT_FOUND) => {}
            other => panic!(
                "round {rounds}: loser failed with {other:?}: {}",
                loser.text()
            ),
        }
        let disk = env.get("f.txt");
        assert!(disk == "from-a\n" || disk == "from-b\n", "{disk:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fs_70_seam_guarded_writes_race_one_winner() {
    let env = Env::new();
    let p = env.put("f.txt", "base");
    let basis = env.ws().stat(&p).await.unwrap().unwrap();
    let mut tasks = Vec::new();
    for i in 0..6 {
        let ws = env.ws().clone();
        let p = p.clone();
        tasks.push(tokio::spawn(async move {
            ws.write_if(
                &p,
                WriteCondition::ReplaceIfVersion(basis),
                format!("w{i}").into_bytes(),
            )
            .await
        }));
    }
    let mut winners = Vec::new();
    for (i, t) in tasks.into_iter().enumerate() {
        match t.await.unwrap() {
            Ok(_) => winners.push(i),
            Err(e) => assert!(e.is_stale(), "{e}"),
        }
    }
    assert_eq!(winners.len(), 1);
    assert_eq!(env.get("f.txt"), format!("w{}", winners[0]));
    // An edit with the old basis is stale too.
    let late = env
        .ws()
        .edit_if(&p, EditCondition::IfVersion(basis), |t| {
            Ok((t.to_owned(), ()))
        })
        .await;
    assert!(late.is_err_and(|e| e.is_stale()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_if_absent_race_creates_once() {
    let env = Env::new();
    let p = env.path("new.txt");
    let (a, b) = tokio::join!(
        env.ws()
            .write_if(&p, WriteCondition::CreateIfAbsent, b"a".to_vec()),
        env.ws()
            .write_if(&p, WriteCondition::CreateIfAbsent, b"b".to_vec()),
    );
    assert_eq!(a.is_ok() as u8 + b.is_ok() as u8, 1);
    let disk = env.get("new.txt");
    assert!(disk == "a" || disk == "b");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_cancelled_while_queued_behind_another_never_applies() {
    use std::sync::Arc;

    use dsh_core::AbortController;
    use dsh_tool_fs::{FsError, WriteStage};

    let env = Env::new();
    let p = env.put("f.txt", "base");
    // The first write holds the path's mutex for a while (slow disk).
    env.ws().set_fault_hook(Some(Arc::new(|stage| {
        if stage == WriteStage::PartlyWritten {
            std::thread::sleep(std::time::Duration::from_millis(300));
        }
        Ok(())
    })));
    let ws = env.ws().clone();
    let p1 = p.clone();
    let first = tokio::spawn(async move {
        ws.write_if(&p1, WriteCondition::Unconditional, b"first".to_vec())
            .await
    });
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let ctl = AbortController::new();
    let signal = ctl.signal();
    let ws = env.ws().clone();
    let p2 = p.clone();
    let second = tokio::spawn(async move {
        ws.write_if_cancellable(
            &p2,
            WriteCondition::Unconditional,
            b"second".to_vec(),
            &signal,
        )
        .await
    });
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    ctl.cancel();
    assert!(matches!(second.await.unwrap(), Err(FsError::Aborted)));
    first.await.unwrap().unwrap();
    assert_eq!(env.get("f.txt"), "first");
}
