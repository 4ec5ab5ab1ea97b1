//! A connection that gives up on a peer that stops making progress: a read or a write
//! that stays pending for longer than the timeout fails with `TimedOut`, which ends the
//! connection. hyper's header-read timeout covers a slow or silent request header; this
//! covers a body that stops arriving and a client that stops reading its response.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// `inner`, with reads and writes that fail once pending for longer than `timeout`.
pub struct StallGuard<T> {
    inner: T,
    timeout: Duration,
    /// When the read now waiting gives up; `None` while no read waits.
    read_deadline: Option<Pin<Box<Sleep>>>,
    /// When the write now waiting gives up.
    write_deadline: Option<Pin<Box<Sleep>>>,
}

impl<T> StallGuard<T> {
    /// Wraps `inner`.
    pub fn new(inner: T, timeout: Duration) -> Self {
        StallGuard { inner, timeout, read_deadline: None, write_deadline: None }
    }
}

/// `poll` as it is while it makes progress (ending the wait); while pending, arms
/// `deadline` on the first poll of a wait and fails once it passes.
fn guard<R>(
    poll: Poll<io::Result<R>>,
    deadline: &mut Option<Pin<Box<Sleep>>>,
    timeout: Duration,
    cx: &mut Context<'_>,
    what: &str,
) -> Poll<io::Result<R>> {
    if poll.is_ready() {
        *deadline = None;
        return poll;
    }
    let sleep = deadline.get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
    match sleep.as_mut().poll(cx) {
        Poll::Ready(()) => {
            Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, format!("no {what} progress for {timeout:?}"))))
        }
        Poll::Pending => Poll::Pending,
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for StallGuard<T> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let poll = Pin::new(&mut this.inner).poll_read(cx, buf);
        guard(poll, &mut this.read_deadline, this.timeout, cx, "read")
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for StallGuard<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let poll = Pin::new(&mut this.inner).poll_write(cx, data);
        guard(poll, &mut this.write_deadline, this.timeout, cx, "write")
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let poll = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        guard(poll, &mut this.write_deadline, this.timeout, cx, "write")
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn a_silent_peer_times_out_and_a_talking_one_does_not() {
        let (client, server) = tokio::io::duplex(64);
        let mut guarded = StallGuard::new(server, Duration::from_millis(300));
        let mut client = client;
        let talker = tokio::spawn(async move {
            for _ in 0..5 {
                tokio::time::sleep(Duration::from_millis(150)).await;
                client.write_all(b"x").await.unwrap();
            }
            client
        });
        let mut byte = [0u8; 1];
        for _ in 0..5 {
            guarded.read_exact(&mut byte).await.unwrap();
        }
        let _client = talker.await.unwrap();
        let e = guarded.read_exact(&mut byte).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
    }

    #[tokio::test]
    async fn a_peer_that_stops_reading_times_out_the_writer() {
        let (_client, server) = tokio::io::duplex(16);
        let mut guarded = StallGuard::new(server, Duration::from_millis(100));
        let e = guarded.write_all(&[0u8; 1024]).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
    }
}
