//! Assembly properties: a tool call's arguments split at any boundaries come back as the exact
//! raw text, through the assembler alone and through each adapter over HTTP; a stream assembled
//! chunk by chunk equals the same stream assembled whole; an interrupted message drops a
//! half-streamed call whole (LOOP-19).

use std::sync::Arc;

use dsh_model::{
    Assembler, AssistantBlock, BlockKind, Chunk, FinishReason, Message, Provider, Request, assemble,
};
use dsh_test_support::mock_provider::{MockProvider, Reply, anthropic as awire, openai as owire};
use futures::StreamExt;
use proptest::prelude::*;
use proptest::sample::Index;

/// `text` cut at the given points (on char boundaries), empty pieces kept.
fn split(text: &str, cuts: &[Index]) -> Vec<String> {
    let bounds: Vec<usize> = (0..=text.len())
        .filter(|&i| text.is_char_boundary(i))
        .collect();
    let mut at: Vec<usize> = cuts.iter().map(|c| bounds[c.index(bounds.len())]).collect();
    at.push(0);
    at.push(text.len());
    at.sort_unstable();
    at.windows(2).map(|w| text[w[0]..w[1]].to_owned()).collect()
}

fn chunks_for(text_pieces: &[String], arg_pieces: &[String]) -> Vec<Chunk> {
    let mut chunks = vec![Chunk::BlockStart {
        index: 0,
        kind: BlockKind::Text,
    }];
    chunks.extend(text_pieces.iter().map(|t| Chunk::TextDelta {
        index: 0,
        text: t.clone(),
    }));
    chunks.push(Chunk::BlockEnd { index: 0 });
    chunks.push(Chunk::BlockStart {
        index: 1,
        kind: BlockKind::ToolCall,
    });
    chunks.push(Chunk::ToolCallDelta {
        index: 1,
        id: Some("call_1".into()),
        name: Some("edit".into()),
        arguments: String::new(),
    });
    chunks.extend(arg_pieces.iter().map(|a| Chunk::ToolCallDelta {
        index: 1,
        id: None,
        name: None,
        arguments: a.clone(),
    }));
    chunks.push(Chunk::BlockEnd { index: 1 });
    chunks.push(Chunk::Finish(FinishReason::ToolCalls));
    chunks
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

proptest! {
    #[test]
    fn arguments_split_anywhere_assemble_to_the_raw_text(
        args in "\\PC{0,80}",
        text in "\\PC{0,20}",
        cuts in proptest::collection::vec(any::<Index>(), 0..24),
        text_cuts in proptest::collection::vec(any::<Index>(), 0..4),
    ) {
        let chunks = chunks_for(&split(&text, &text_cuts), &split(&args, &cuts));
        let mut incremental = Assembler::new();
        for c in &chunks {
            incremental.push(c);
        }
        let stream: dsh_model::ChunkStream =
            Box::pin(futures::stream::iter(chunks.clone().into_iter().map(Ok)));
        let whole = runtime().block_on(assemble(stream)).unwrap();
        prop_assert_eq!(&incremental.message(), &whole);
        let call = whole.tool_calls().next().unwrap();
        prop_assert_eq!(&call.arguments, &args);
        prop_assert_eq!(whole.text(), text);
    }

    #[test]
    fn loop_19_a_half_streamed_call_is_dropped_whole_when_interrupted(
        args in "\\PC{1,40}",
        cut in any::<Index>(),
    ) {
        let chunks = chunks_for(&["reading the file".to_owned()], &split(&args, &[cut]));
        // Stop anywhere after the call started but before its block ended.
        let start = chunks.iter().position(|c| matches!(c, Chunk::BlockStart { index: 1, .. })).unwrap();
        let end = chunks.iter().position(|c| matches!(c, Chunk::BlockEnd { index: 1 })).unwrap();
        for stop in start + 1..end {
            let mut a = Assembler::new();
            chunks[..stop].iter().for_each(|c| a.push(c));
            prop_assert_eq!(
                a.interrupted().blocks,
                vec![AssistantBlock::Text { text: "reading the file".into() }]
            );
        }
        let mut a = Assembler::new();
        chunks[..=end].iter().for_each(|c| a.push(c));
        prop_assert_eq!(a.interrupted().tool_calls().count(), 1);
    }
}

async fn through_openai(args: &str, pieces: &[String]) -> String {
    let server = MockProvider::start().await.unwrap();
    let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
    let mut frames = vec![owire::role()];
    frames.extend(owire::tool_call(0, "call_0", "edit", &refs));
    frames.extend(owire::finish("tool_calls", 5, 5));
    server.push(Reply::Stream(frames));
    let provider = super::openai(&server);
    let request = Arc::new(Request::new("m", vec![Message::user(args)]));
    let stream = provider.stream(request).await.unwrap();
    // Assemble incrementally from the wire and compare with the whole.
    let chunks: Vec<Chunk> = stream.map(|c| c.unwrap()).collect().await;
    let mut a = Assembler::new();
    chunks.iter().for_each(|c| a.push(c));
    let whole = assemble(Box::pin(futures::stream::iter(chunks.into_iter().map(Ok))))
        .await
        .unwrap();
    assert_eq!(a.finish(), whole);
    whole.tool_calls().next().unwrap().arguments.clone()
}

async fn through_anthropic(pieces: &[String]) -> String {
    let server = MockProvider::start().await.unwrap();
    let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
    let mut frames = vec![awire::message_start(1, 0)];
    frames.extend(awire::tool_use_block(0, "toolu_0", "edit", &refs));
    frames.extend(awire::message_end("tool_use", 5));
    server.push(Reply::Stream(frames));
    let request = Arc::new(Request::new("m", vec![Message::user("go")]));
    let message = assemble(super::anthropic(&server).stream(request).await.unwrap())
        .await
        .unwrap();
    message.tool_calls().next().unwrap().arguments.clone()
}

#[tokio::test]
async fn arguments_split_at_every_character_come_back_exact_over_http() {
    let args = r#"{"old_string": "fn main() {\n\t\"x\"\n}", "new_string": "ü — 🙂", "n": 1e3}"#;
    let every: Vec<String> = args.chars().map(String::from).collect();
    assert_eq!(through_openai(args, &every).await, args);
    assert_eq!(through_anthropic(&every).await, args);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn arguments_split_at_random_boundaries_come_back_exact_over_http(
        args in "\\PC{1,60}",
        cuts in proptest::collection::vec(any::<Index>(), 0..16),
    ) {
        let pieces = split(&args, &cuts);
        let rt = runtime();
        prop_assert_eq!(rt.block_on(through_openai(&args, &pieces)), args.clone());
        prop_assert_eq!(rt.block_on(through_anthropic(&pieces)), args);
    }
}
