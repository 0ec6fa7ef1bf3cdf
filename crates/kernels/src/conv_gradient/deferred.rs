//! A one-input, one-output op of an inner backend, queued on Burn's fusion backend as an
//! operation of its own: registered in the calling thread's stream (custom: fusion fuses
//! nothing into it), run by the inner backend when the stream runs. What `windows/` and
//! `spread/` need to run their kernels under fusion.
//!
//! By hand rather than by `#[backend_extension(Cube, Fusion)]`: the macro's code names
//! `burn::backend::fusion`, which only Burn's own `fusion` feature brings, and towers-multigpu
//! turns on CubeCL's fusion without it (see its `fusion` feature). The extensions' impls over
//! `Fusion<B>` cover every fusion backend over one that implements them, so they compile, and
//! `Cube` has the extensions, whether or not CubeCL's fusion is on.

use burn::backend::Scalar;
use burn::backend::tensor::FloatTensor;
use burn::tensor::Shape;
use burn_fusion::custom::{
    CustomOpIr, HandleContainer, Operation, OperationIr, OperationOutput, ScalarIr, StreamId,
    TensorIr,
};
use burn_fusion::{ExecutionError, Fusion, FusionBackend, FusionRuntime};

/// `op` of `x`, an output of shape `out` and `x`'s dtype, queued on `x`'s fusion stream.
/// `id` names the operation, `scalars` its integer arguments (as `#[backend_extension]` gives
/// them: a graph fusion caches and replays carries them).
pub(super) fn deferred<B, F>(
    x: FloatTensor<Fusion<B>>,
    out: Shape,
    id: &str,
    scalars: &[usize],
    op: F,
) -> FloatTensor<Fusion<B>>
where
    B: FusionBackend,
    F: Fn(FloatTensor<B>) -> FloatTensor<B> + Send + Sync + 'static,
{
    let client = x.client.clone();
    let output = TensorIr::uninit(client.create_empty_handle(), out, x.dtype);
    let input = x.into_ir();
    let description = CustomOpIr {
        id: id.into(),
        inputs: vec![input.clone()],
        outputs: vec![output.clone()],
        scalars: (scalars.iter())
            .map(|&n| ScalarIr::from(Scalar::from(n)))
            .collect(),
    };
    let operation = Deferred::<B, F> {
        input,
        output,
        op,
        backend: std::marker::PhantomData,
    };
    client
        .register(
            StreamId::current(),
            OperationIr::Custom(description),
            operation,
        )
        .output()
}

/// The queued call: the input's handle in, the output's handle out.
struct Deferred<B, F> {
    input: TensorIr,
    output: TensorIr,
    op: F,
    backend: std::marker::PhantomData<B>,
}

impl<B, F> std::fmt::Debug for Deferred<B, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (f.debug_struct("Deferred"))
            .field("input", &self.input)
            .field("output", &self.output)
            .finish_non_exhaustive()
    }
}

impl<B, F> Operation<B::FusionRuntime> for Deferred<B, F>
where
    B: FusionBackend,
    F: Fn(FloatTensor<B>) -> FloatTensor<B> + Send + Sync,
{
    fn execute(
        &self,
        handles: &mut HandleContainer<<B::FusionRuntime as FusionRuntime>::FusionHandle>,
    ) -> Result<(), ExecutionError> {
        let x = handles.get_float_tensor::<B>(&self.input);
        handles.register_float_tensor::<B>(&self.output.id, (self.op)(x));
        Ok(())
    }
}
