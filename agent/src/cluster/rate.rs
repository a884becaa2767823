//! The token bucket in front of every API call of a cluster.

use std::time::Duration;

use tokio::sync::Mutex;
use tokio::time::Instant;

/// A token bucket in front of every API call.
pub struct RateLimiter {
    qps: f64,
    burst: f64,
    state: Mutex<Bucket>,
}

struct Bucket {
    tokens: f64,
    last: Instant,
}

impl RateLimiter {
    /// A bucket holding `burst` tokens, refilled at `qps` per second. A non-positive rate means
    /// no limit.
    pub fn new(qps: f64, burst: u32) -> RateLimiter {
        let burst = f64::from(burst.max(1));
        RateLimiter {
            qps,
            burst,
            state: Mutex::new(Bucket {
                tokens: burst,
                last: Instant::now(),
            }),
        }
    }

    /// Takes one token, waiting for it when the bucket is empty. Waiters are served in order:
    /// the lock is held while waiting.
    pub async fn acquire(&self) {
        if self.qps <= 0.0 {
            return;
        }
        let mut bucket = self.state.lock().await;
        let now = Instant::now();
        let refill = now.duration_since(bucket.last).as_secs_f64() * self.qps;
        bucket.tokens = (bucket.tokens + refill).min(self.burst);
        bucket.last = now;
        if bucket.tokens < 1.0 {
            let wait = Duration::from_secs_f64((1.0 - bucket.tokens) / self.qps);
            tokio::time::sleep(wait).await;
            bucket.tokens = 1.0;
            bucket.last = Instant::now();
        }
        bucket.tokens -= 1.0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_bucket_allows_a_burst_then_the_rate() {
        let limiter = RateLimiter::new(10.0, 3);
        let start = Instant::now();
        for _ in 0..3 {
            limiter.acquire().await;
        }
        assert_eq!(start.elapsed(), Duration::ZERO, "the burst is free");
        for _ in 0..5 {
            limiter.acquire().await;
        }
        // Five more tokens at 10 per second take half a second of (paused, virtual) time.
        let elapsed = start.elapsed().as_secs_f64();
        assert!((0.49..0.52).contains(&elapsed), "{elapsed}");
    }
}
