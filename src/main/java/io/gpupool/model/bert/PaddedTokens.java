package io.gpupool.model.bert;

import io.gpupool.kernels.TensorOps;
import io.gpupool.kernels.TensorOps.Pooling;
import io.gpupool.model.ModelConfig;
import io.gpupool.model.plan.ExecutionPlan;

import static io.gpupool.model.plan.ExecutionPlan.ids;

/**
 * The padded layout of {@link BertEncoderPlan}: B sequences of S tokens, invoked as (B, S), B·S token rows; the
 * mask says which tokens are real, position ids are implied by the column.
 */
final class PaddedTokens implements BertEncoderPlan.TokenLayout {

    private final int hidden;
    private final int heads;
    private final int headDim;
    private final int elem;
    private final TensorOps planningOps;
    private int idsTensor;
    private int maskTensor;
    private int typesTensor;

    PaddedTokens(ModelConfig.Bert arch, TensorOps planningOps) {
        this.hidden = arch.hiddenSize();
        this.elem = planningOps.activationBytes();
        this.heads = arch.numAttentionHeads();
        this.headDim = arch.headDim();
        this.planningOps = planningOps;
    }

    @Override
    public ExecutionPlan.Size perToken(long bytesPerRow) {
        return (batch, seq) -> (long) batch * seq * bytesPerRow;
    }

    @Override
    public int rows(ExecutionPlan.Invocation inv) {
        return inv.batch() * inv.seq();
    }

    @Override
    public BertEncoderPlan.OptionalInputs inputs(ExecutionPlan.Builder b) {
        ExecutionPlan.Size tokensInt = perToken(Integer.BYTES);
        idsTensor = b.tensor(BertModel.INPUT_IDS, tokensInt);
        maskTensor = b.optionalTensor(BertModel.ATTENTION_MASK, tokensInt);
        typesTensor = b.optionalTensor(BertModel.TOKEN_TYPE_IDS, tokensInt);
        b.step("upload inputs", ids(), ids(idsTensor, maskTensor, typesTensor),
                inv -> BertEncoderPlan.uploadTokens(inv, idsTensor, maskTensor, typesTensor));
        return new BertEncoderPlan.OptionalInputs(maskTensor, typesTensor);
    }

    @Override
    public int embed(ExecutionPlan.Builder b, BertEncoderPlan.Embeddings e) {
        int embedded = b.tensor("embeddings.out", perToken((long) hidden * elem));
        b.step("embeddings", ids(idsTensor, typesTensor), ids(embedded), inv -> inv.context().ops()
                .embeddingLayerNorm(inv.context().stream(), inv.address(idsTensor), inv.address(typesTensor),
                        e.word(), e.position(), e.tokenType(), e.gamma(), e.beta(), inv.address(embedded),
                        inv.batch(), inv.seq(), e.hidden(), e.eps()));
        return embedded;
    }

    @Override
    public int attend(ExecutionPlan.Builder b, String layerPrefix, int qkv) {
        int workspace = b.tensor(layerPrefix + "attention.workspace",
                (bs, s) -> planningOps.attentionWorkspaceBytes(bs, s, heads, headDim));
        int context = b.tensor(layerPrefix + "attention.context", perToken((long) hidden * elem));
        b.step(layerPrefix + "attention", ids(qkv, maskTensor), ids(workspace, context), inv -> inv.context().ops()
                .attention(inv.context().stream(), inv.address(qkv), inv.address(maskTensor),
                        inv.address(workspace), inv.address(context), inv.batch(), inv.seq(), heads, headDim));
        return context;
    }

    @Override
    public void pool(ExecutionPlan.Builder b, String step, int states, boolean masked, Pooling pooling, int out,
                     BertEncoderPlan.Readers readers) {
        int[] reads = masked ? ids(states, maskTensor) : ids(states);
        b.step(step, reads, ids(out), inv -> {
            if (readers.anyDownloaded(inv.state())) {
                inv.context().ops().pool(inv.context().stream(), inv.address(states),
                        masked ? inv.address(maskTensor) : 0, inv.address(out), inv.batch(), inv.seq(), hidden,
                        pooling);
            }
        });
    }
}
