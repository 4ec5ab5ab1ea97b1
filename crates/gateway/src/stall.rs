//! A connection that gives up on a peer that stops making progress: a read or a write
//! that stays pending for longer than the timeout fails with `TimedOut`, which ends the
//! connection. hyper's header-read timeout covers a slow or silent request header; this
//! covers a body that stops arriving and a client that stops reading its response; and
//! [`MinRate`] a body that trickles in, a byte now and then, slower than a minimum rate.

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

/// A request body that fails once it falls behind a minimum rate: after `grace`, the
/// body must have delivered `min_rate` bytes for every further second (Apache's
/// mod_reqtimeout `body=GRACE,MinRate=RATE`). The deadline is armed only while the body
/// is pending, so a body that arrives at once costs no timer.
pub struct MinRate<B> {
    inner: B,
    started: tokio::time::Instant,
    grace: Duration,
    min_rate: u64,
    received: u64,
    deadline: Option<Pin<Box<Sleep>>>,
}

impl<B> MinRate<B> {
    /// `inner`, held to `min_rate` bytes per second after `grace`.
    pub fn new(inner: B, grace: Duration, min_rate: u64) -> Self {
        MinRate {
            inner,
            started: tokio::time::Instant::now(),
            grace,
            min_rate: min_rate.max(1),
            received: 0,
            deadline: None,
        }
    }

    /// When the body must have delivered more than it has.
    fn due(&self) -> tokio::time::Instant {
        let earned = Duration::from_secs_f64(self.received as f64 / self.min_rate as f64);
        self.started + self.grace + earned
    }
}

impl<B> http_body::Body for MinRate<B>
where
    B: http_body::Body<Data = bytes::Bytes> + Unpin,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Data = bytes::Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<bytes::Bytes>, Self::Error>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(frame) => {
                if let Some(Ok(data)) = frame.as_ref().map(|f| f.as_ref().map(|f| f.data_ref().map_or(0, |d| d.len())))
                {
                    this.received += data as u64;
                }
                this.deadline = None;
                Poll::Ready(frame.map(|f| f.map_err(Into::into)))
            }
            Poll::Pending => {
                let due = this.due();
                let sleep = this.deadline.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(due)));
                sleep.as_mut().reset(due);
                match sleep.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Some(Err(format!(
                        "the request body arrives slower than {} bytes a second ({} bytes in {:?})",
                        this.min_rate,
                        this.received,
                        this.started.elapsed()
                    )
                    .into()))),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
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

    /// A body of `chunks` frames of `size` bytes, one every `every`.
    fn trickle(
        chunks: usize,
        size: usize,
        every: Duration,
    ) -> http_body_util::StreamBody<
        impl futures::Stream<Item = Result<http_body::Frame<bytes::Bytes>, std::io::Error>> + Unpin,
    > {
        let stream = futures::stream::unfold(0, move |n| async move {
            if n == chunks {
                return None;
            }
            tokio::time::sleep(every).await;
            Some((Ok(http_body::Frame::data(bytes::Bytes::from(vec![b'x'; size]))), n + 1))
        });
        http_body_util::StreamBody::new(Box::pin(stream))
    }

    #[tokio::test]
    async fn a_body_slower_than_the_minimum_rate_fails_and_a_steady_one_does_not() {
        use http_body_util::BodyExt;
        let tick = Duration::from_millis(20);
        // 1,000 bytes every 20 ms (50 KB/s) against a minimum of 10 KB/s after 100 ms: read whole.
        let steady = MinRate::new(trickle(10, 1000, tick), Duration::from_millis(100), 10_000);
        assert_eq!(steady.collect().await.unwrap().to_bytes().len(), 10_000);
        // 10 bytes every 20 ms (500 B/s) against 10 KB/s: fails soon after the grace.
        let slow = MinRate::new(trickle(500, 10, tick), Duration::from_millis(100), 10_000);
        let started = tokio::time::Instant::now();
        let error = slow.collect().await.unwrap_err();
        assert!(error.to_string().contains("slower than 10000 bytes a second"), "{error}");
        assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    }

    #[tokio::test]
    async fn a_peer_that_stops_reading_times_out_the_writer() {
        let (_client, server) = tokio::io::duplex(16);
        let mut guarded = StallGuard::new(server, Duration::from_millis(100));
        let e = guarded.write_all(&[0u8; 1024]).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
    }
}
