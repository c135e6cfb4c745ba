//! Folding the answers of several hooks on one point, most restrictively: deny > ask > allow >
//! pass, whatever their order; reasons and contexts are kept in configuration order.

use crate::protocol::Verdict;

/// One hook's answer after its failure policy was applied.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Answer {
    /// Its verdict.
    pub verdict: Option<Verdict>,
    /// The reason for a deny, ask or block.
    pub reason: Option<String>,
    /// Its contexts, in output order.
    pub contexts: Vec<String>,
}

/// What all the hooks of one point decided together.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Folded {
    /// The most restrictive verdict (`Pass` when no hook had one).
    pub verdict: Verdict,
    /// The reasons of the hooks whose verdict is the folded one, in order.
    pub reasons: Vec<String>,
    /// Every hook's contexts, in order.
    pub contexts: Vec<String>,
}

impl Folded {
    /// The reasons as one text (one per line), if any.
    pub fn reason(&self) -> Option<String> {
        if self.reasons.is_empty() {
            None
        } else {
            Some(self.reasons.join("\n"))
        }
    }
}

/// Folds answers given in configuration order.
pub fn fold<'a>(answers: impl IntoIterator<Item = &'a Answer>) -> Folded {
    let answers: Vec<&Answer> = answers.into_iter().collect();
    let verdict = answers
        .iter()
        .filter_map(|a| a.verdict)
        .max()
        .unwrap_or(Verdict::Pass);
    let reasons = answers
        .iter()
        .filter(|a| a.verdict == Some(verdict))
        .filter_map(|a| a.reason.clone())
        .collect();
    let contexts = answers
        .iter()
        .flat_map(|a| a.contexts.iter().cloned())
        .collect();
    Folded {
        verdict,
        reasons,
        contexts,
    }
}
