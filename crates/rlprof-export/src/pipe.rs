//! A writer that hands its bytes to another thread, so that compressing a trace (gzip) runs
//! beside formatting it instead of after each piece: formatting and compression cost about the
//! same per byte, and the trace writer already produces 1 MiB pieces.

use std::io::{self, Write};
use std::sync::mpsc::{SyncSender, sync_channel};
use std::thread::JoinHandle;

/// Pieces in flight between the threads (bounds the memory to a few MiB).
const DEPTH: usize = 4;

/// The sending end; [`Pipe::finish`] returns the inner writer once everything is written.
pub(crate) struct Pipe<W: Write + Send + 'static> {
    tx: Option<SyncSender<Vec<u8>>>,
    worker: Option<JoinHandle<io::Result<W>>>,
}

impl<W: Write + Send + 'static> Pipe<W> {
    /// Starts the thread that writes into `inner`.
    pub(crate) fn new(mut inner: W) -> io::Result<Pipe<W>> {
        let (tx, rx) = sync_channel::<Vec<u8>>(DEPTH);
        let worker = std::thread::Builder::new()
            .name("rlprof-gzip".into())
            .spawn(move || {
                for piece in rx {
                    inner.write_all(&piece)?;
                }
                Ok(inner)
            })?;
        Ok(Pipe {
            tx: Some(tx),
            worker: Some(worker),
        })
    }

    /// Waits for the thread and returns the inner writer, or the first error it hit.
    pub(crate) fn finish(mut self) -> io::Result<W> {
        self.tx.take();
        self.join()
    }

    fn join(&mut self) -> io::Result<W> {
        let worker = self.worker.take().expect("joined once");
        worker
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("compression thread panicked")))
    }
}

impl<W: Write + Send + 'static> Write for Pipe<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let tx = self.tx.as_ref().expect("not finished");
        if tx.send(buf.to_vec()).is_err() {
            // The thread stopped: it failed; report its error.
            self.tx.take();
            return Err(self
                .join()
                .err()
                .unwrap_or_else(|| io::ErrorKind::BrokenPipe.into()));
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<W: Write + Send + 'static> Drop for Pipe<W> {
    fn drop(&mut self) {
        self.tx.take();
        if self.worker.is_some() {
            let _ = self.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_arrive_in_order() {
        let mut p = Pipe::new(Vec::new()).unwrap();
        for i in 0..1000u32 {
            p.write_all(&i.to_le_bytes()).unwrap();
        }
        let out = p.finish().unwrap();
        let want: Vec<u8> = (0..1000u32).flat_map(|i| i.to_le_bytes()).collect();
        assert_eq!(out, want);
    }

    struct Failing(usize);
    impl Write for Failing {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            if self.0 == 0 {
                return Err(io::Error::other("disk full"));
            }
            self.0 -= 1;
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn the_writer_error_comes_back() {
        let mut p = Pipe::new(Failing(3)).unwrap();
        let mut err = None;
        for _ in 0..100 {
            if let Err(e) = p.write_all(b"x") {
                err = Some(e);
                break;
            }
        }
        let e = match err {
            Some(e) => e,
            None => p.finish().err().expect("an error"),
        };
        assert!(e.to_string().contains("disk full"), "{e}");
    }
}
