//! The tools a request carries, in order (REG-81..84).

#![allow(clippy::expect_used, clippy::unwrap_used)]

use super::support::*;

fn header_tools(rig: &Rig) -> Vec<String> {
    rig.data("request/header")[0]["header"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

fn request_tools(rig: &Rig) -> Vec<String> {
    rig.bodies()[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn reg_81_82_without_a_configured_order_tools_go_lexicographic_whatever_the_registration() {
    for registration in [["zulu", "alpha", "mike"], ["mike", "zulu", "alpha"]] {
        let rig = rig_with(|c| c, &registration).await;
        rig.server.push(say("ok"));
        rig.agent.prompt("hi").await.unwrap();
        assert_eq!(header_tools(&rig), ["alpha", "echo", "mike", "zulu"]);
        assert_eq!(request_tools(&rig), ["alpha", "echo", "mike", "zulu"]);
    }
}

#[tokio::test]
async fn reg_83_the_configured_order_comes_first_and_the_rest_stay_lexicographic() {
    let rig = rig_with(|c| c.with_tool_order(["zulu"]), &["zulu", "alpha", "mike"]).await;
    rig.server.push(say("ok"));
    rig.agent.prompt("hi").await.unwrap();
    assert_eq!(header_tools(&rig), ["zulu", "alpha", "echo", "mike"]);
    assert_eq!(request_tools(&rig), ["zulu", "alpha", "echo", "mike"]);
    let header = &rig.data("request/header")[0];
    assert_eq!(header["reason"], "initial");
    assert_eq!(header["header"]["config"]["model"], "deepseek-chat");
}

#[tokio::test]
async fn reg_84_an_order_naming_an_unregistered_tool_sends_nothing_and_opens_no_step() {
    let rig = rig_with(|c| c.with_tool_order(["ghost"]), &["alpha"]).await;
    rig.agent.prompt("hi").await.unwrap();
    assert_eq!(rig.bodies().len(), 0);
    assert_eq!(rig.count("request/header"), 0);
    assert_eq!(rig.count("turn/start"), 1);
    assert_eq!(rig.count("turn/end"), 1);
    assert_eq!(rig.count("step/start"), 0);
    let reason = &rig.reasons()[0];
    assert_eq!(reason["kind"], "error");
    assert!(
        reason["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("ghost")),
        "{reason}"
    );
}
