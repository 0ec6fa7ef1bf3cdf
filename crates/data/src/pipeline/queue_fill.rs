//! [`QueueFill`]: how full a pipeline's queues are, for the log and TensorBoard.

/// How full the pipeline's queues are, each from 0.0 to 1.0. An example queue that stays near
/// empty while training means the input is starving the devices.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QueueFill {
    /// The example queue.
    pub examples: f32,
    /// The batch (prefetch) queue.
    pub batches: f32,
}
