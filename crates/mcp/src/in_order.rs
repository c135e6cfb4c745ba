//! A server connection's transport, read in order: each `notifications/progress` reaches the
//! progress observer as it is read, before anything read after it.
//!
//! rmcp hands notifications to the client handler in a task of their own but answers a request
//! on its reading loop, so a server's last progress notification, sent just before its result,
//! could reach the observer after the call had ended, and be dropped as belonging to no call
//! (over streamable HTTP about one call in two). Read here, in the loop's own order, a call's
//! progress always precedes its answer.
//!
//! Guarantee: every progress notification read before a call's answer is given to the hub
//! (and so to the observer, while the call is registered) before the call sees its answer.

use std::borrow::Cow;
use std::future::Future;
use std::sync::Arc;

use rmcp::model::{JsonRpcMessage, JsonRpcNotification, ServerNotification};
use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;

use crate::hub::Hub;

/// `inner`, whose progress notifications go to the hub as they are read.
pub(crate) struct InOrder<T> {
    inner: T,
    server: Arc<str>,
    hub: Arc<Hub>,
}

impl<T> InOrder<T> {
    pub(crate) fn new(inner: T, server: Arc<str>, hub: Arc<Hub>) -> InOrder<T> {
        InOrder { inner, server, hub }
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for InOrder<T> {
    type Error = T::Error;

    fn name() -> Cow<'static, str> {
        T::name()
    }

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        let message = self.inner.receive().await?;
        if let JsonRpcMessage::Notification(JsonRpcNotification {
            notification: ServerNotification::ProgressNotification(progress),
            ..
        }) = &message
        {
            self.hub.progress(&self.server, progress.params.clone());
        }
        Some(message)
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
