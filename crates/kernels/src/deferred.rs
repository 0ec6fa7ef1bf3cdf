//! An op of an inner backend with one output, queued on Burn's fusion backend as an operation
//! of its own: registered in the calling thread's stream (custom: fusion fuses nothing into
//! it), run by the inner backend when the stream runs. What the kernels of ours need to run
//! under fusion (`conv_gradient/windows/`, `conv_gradient/spread/`,
//! `batch_norm/gradient_sums/`).
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

/// `op` of `inputs` (all on one device), an output of shape `out` and the first input's dtype,
/// queued in the calling thread's stream of their device. `id` names the operation, `scalars`
/// its integer arguments (as `#[backend_extension]` gives them: a graph fusion caches and
/// replays carries them).
pub(crate) fn deferred<B, F, const N: usize>(
    inputs: [FloatTensor<Fusion<B>>; N],
    out: Shape,
    id: &str,
    scalars: &[usize],
    op: F,
) -> FloatTensor<Fusion<B>>
where
    B: FusionBackend,
    F: Fn([FloatTensor<B>; N]) -> FloatTensor<B> + Send + Sync + 'static,
{
    let client = inputs[0].client.clone();
    let output = TensorIr::uninit(client.create_empty_handle(), out, inputs[0].dtype);
    let inputs = inputs.map(|x| x.into_ir());
    let description = CustomOpIr {
        id: id.into(),
        inputs: inputs.to_vec(),
        outputs: vec![output.clone()],
        scalars: (scalars.iter())
            .map(|&n| ScalarIr::from(Scalar::from(n)))
            .collect(),
    };
    let operation = Deferred::<B, F, N> {
        inputs,
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

/// The queued call: the inputs' handles in, the output's handle out.
struct Deferred<B, F, const N: usize> {
    inputs: [TensorIr; N],
    output: TensorIr,
    op: F,
    backend: std::marker::PhantomData<B>,
}

impl<B, F, const N: usize> std::fmt::Debug for Deferred<B, F, N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (f.debug_struct("Deferred"))
            .field("inputs", &self.inputs)
            .field("output", &self.output)
            .finish_non_exhaustive()
    }
}

impl<B, F, const N: usize> Operation<B::FusionRuntime> for Deferred<B, F, N>
where
    B: FusionBackend,
    F: Fn([FloatTensor<B>; N]) -> FloatTensor<B> + Send + Sync,
{
    fn execute(
        &self,
        handles: &mut HandleContainer<<B::FusionRuntime as FusionRuntime>::FusionHandle>,
    ) -> Result<(), ExecutionError> {
        let inputs = (self.inputs.each_ref()).map(|input| handles.get_float_tensor::<B>(input));
        handles.register_float_tensor::<B>(&self.output.id, (self.op)(inputs));
        Ok(())
    }
}
