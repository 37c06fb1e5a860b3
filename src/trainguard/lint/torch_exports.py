"""Public names that ``from <module> import *`` binds, for the torch modules scripts star-import.

The linter never imports torch, so these lists are data: generated from torch 2.13 with
``python -m trainguard.lint.torch_exports > new.py`` (which imports torch) and checked against the
installed torch by the tests (every listed name must still exist). A module's ``__all__`` when it
has one, else its names without a leading underscore (``torch.nn`` and ``torch.nn.functional``
define no ``__all__``); modules it merely imports (``torch.nn.functional`` imports ``torch`` and
``math``) are left out, its own submodules (``torch.nn.functional`` in ``torch.nn``) kept.
Names missing from a newer torch only leave a call unresolved (a miss, never a false alarm).
"""

from __future__ import annotations

__all__ = ["EXPORTS", "render"]

MODULES = ("torch", "torch.nn", "torch.nn.functional", "torch.optim", "torch.optim.lr_scheduler",
           "torch.utils.data")

_NAMES = {
    "torch": """
        AVG AcceleratorError AggregationType AliasDb AnyType Argument ArgumentSpec AwaitType
        BenchmarkConfig BenchmarkExecutionStats Block BoolStorage BoolTensor BoolType BufferDict
        ByteStorage ByteTensor CallStack Capsule CharStorage CharTensor ClassType Code
        CompilationUnit CompleteArgumentSpec ComplexType ConcreteModuleType
        ConcreteModuleTypeBuilder DeepCopyMemoTable DeserializationStorageContext DeviceObjType
        DictType DisableTorchFunction DisableTorchFunctionSubclass DispatchKey DispatchKeySet
        DoubleStorage DoubleTensor EnumType ErrorReport Event ExcludeDispatchKeyGuard ExecutionPlan
        FatalError FileCheck FloatStorage FloatTensor FloatType FunctionSchema Future FutureType
        Generator GradScaler Gradient Graph GraphExecutorState IODescriptor InferredType IntStorage
        IntTensor IntType InterfaceType JITException ListType LiteScriptModule LockingLogger
        LongStorage LongTensor ModuleDict Node NoneType NoopLogger NumberType OperatorInfo
        OptionalType OutOfMemoryError ParameterDict PyObjectType PyTorchFileReader PyTorchFileWriter
        RRefType SUM ScriptClass ScriptClassFunction ScriptDict ScriptDictIterator
        ScriptDictKeyIterator ScriptFunction ScriptList ScriptListIterator ScriptMethod ScriptModule
        ScriptModuleSerializer ScriptObject ScriptObjectProperty SerializationStorageContext
        ShortStorage ShortTensor Size StaticModule Stream StreamObjType StringType SymBool
        SymBoolType SymFloat SymInt SymIntType Tag Tensor TensorType ThroughputBenchmark
        TracingState TupleType Type TypedStorage UnionType UntypedStorage Use Value abs abs_
        absolute acos acos_ acosh acosh_ adaptive_avg_pool1d adaptive_max_pool1d add addbmm addcdiv
        addcmul addmm addmv addmv_ addr adjoint affine_grid_generator alias_copy all allclose
        alpha_dropout alpha_dropout_ amax amin aminmax angle any arange arccos arccos_ arccosh
        arccosh_ arcsin arcsin_ arcsinh arcsinh_ arctan arctan2 arctan_ arctanh arctanh_
        are_deterministic_algorithms_enabled argmax argmin argsort argwhere as_strided as_strided_
        as_strided_copy as_strided_scatter as_tensor asarray asin asin_ asinh asinh_ atan atan2
        atan_ atanh atanh_ atleast_1d atleast_2d atleast_3d autocast autocast_decrement_nesting
        autocast_increment_nesting avg_pool1d baddbmm bartlett_window batch_norm
        batch_norm_backward_elemt batch_norm_backward_reduce batch_norm_elemt
        batch_norm_gather_stats batch_norm_gather_stats_with_counts batch_norm_stats
        batch_norm_update_stats bernoulli bfloat16 bilinear binary_cross_entropy_with_logits
        bincount binomial bit bits16 bits1x8 bits2x4 bits4x2 bits8 bitwise_and bitwise_left_shift
        bitwise_not bitwise_or bitwise_right_shift bitwise_xor blackman_window block_diag bmm bool
        broadcast_tensors broadcast_to bucketize can_cast cartesian_prod cat ccol_indices_copy cdist
        cdouble ceil ceil_ celu celu_ cfloat chain_matmul chalf channel_shuffle cholesky
        cholesky_inverse cholesky_solve choose_qparams_optimized chunk clamp clamp_ clamp_max
        clamp_max_ clamp_min clamp_min_ clear_autocast_cache clip clip_ clone col_indices_copy
        column_stack combinations compile complex complex128 complex32 complex64 concat concatenate
        cond conj conj_physical conj_physical_ constant_pad_nd conv1d conv2d conv3d conv_tbc
        conv_transpose1d conv_transpose2d conv_transpose3d convolution copysign corrcoef cos cos_
        cosh cosh_ cosine_embedding_loss cosine_similarity count_nonzero cov cross crow_indices_copy
        ctc_loss cudnn_affine_grid_generator cudnn_batch_norm cudnn_convolution
        cudnn_convolution_add_relu cudnn_convolution_relu cudnn_convolution_transpose
        cudnn_grid_sampler cudnn_is_acceptable cummax cummin cumprod cumsum cumulative_trapezoid
        default_generator deg2rad deg2rad_ dequantize det detach detach_ detach_copy device diag
        diag_embed diagflat diagonal diagonal_copy diagonal_scatter diff digamma dist div divide dot
        double dropout dropout_ dsmm dsplit dstack dtype e einsum embedding embedding_bag
        embedding_renorm_ empty empty_like empty_permuted empty_quantized empty_strided enable_grad
        eq equal erf erf_ erfc erfc_ erfinv exp exp2 exp2_ exp_ expand_copy expm1 expm1_ export eye
        fake_quantize_per_channel_affine fake_quantize_per_tensor_affine fbgemm_linear_fp16_weight
        fbgemm_linear_fp16_weight_fp32_activation fbgemm_linear_int8_weight
        fbgemm_linear_int8_weight_fp32_activation fbgemm_linear_quantize_weight
        fbgemm_pack_gemm_matrix_fp16 fbgemm_pack_quantized_matrix feature_alpha_dropout
        feature_alpha_dropout_ feature_dropout feature_dropout_ fill fill_ finfo fix fix_ flatten
        flip fliplr flipud float float16 float32 float4_e2m1fn_x2 float64 float8_e4m3fn
        float8_e4m3fnuz float8_e5m2 float8_e5m2fnuz float8_e8m0fnu float_power floor floor_
        floor_divide fmax fmin fmod fork frac frac_ frexp frobenius_norm from_file from_numpy
        frombuffer full full_like fused_moving_avg_obs_fake_quant gather gcd gcd_ ge geqrf ger
        get_autocast_cpu_dtype get_autocast_dtype get_autocast_gpu_dtype get_autocast_ipu_dtype
        get_autocast_xla_dtype get_default_device get_default_dtype get_deterministic_debug_mode
        get_device get_device_module get_float32_matmul_precision get_num_interop_threads
        get_num_threads get_rng_state gradient greater greater_equal grid_sampler grid_sampler_2d
        grid_sampler_3d group_norm gru gru_cell gt half hamming_window hann_window hardshrink
        has_lapack has_mkl has_openmp has_spectral hash_tensor heaviside hinge_embedding_loss histc
        histogram histogramdd hsmm hsplit hspmm hstack hypot i0 i0_ igamma igammac iinfo imag
        import_ir_module import_ir_module_from_buffer index_add index_copy index_fill index_put
        index_put_ index_reduce index_select indices_copy inf inference_mode init_num_threads
        initial_seed inner instance_norm int int1 int16 int2 int3 int32 int4 int5 int6 int64 int7
        int8 int_repr inverse is_anomaly_check_nan_enabled is_anomaly_enabled
        is_autocast_cache_enabled is_autocast_cpu_enabled is_autocast_enabled
        is_autocast_ipu_enabled is_autocast_xla_enabled is_complex is_conj
        is_deterministic_algorithms_warn_only_enabled is_distributed is_floating_point
        is_grad_enabled is_inference is_inference_mode_enabled is_neg is_nonzero is_same_size
        is_signed is_storage is_tensor is_vulkan_available is_warn_always_enabled isclose isfinite
        isin isinf isnan isneginf isposinf isreal istft kaiser_window kl_div kron kthvalue
        layer_norm layout lcm lcm_ ldexp ldexp_ le lerp less less_equal lgamma linspace load lobpcg
        log log10 log10_ log1p log1p_ log2 log2_ log_ log_softmax logaddexp logaddexp2 logcumsumexp
        logdet logical_and logical_not logical_or logical_xor logit logit_ logspace logsumexp long
        lstm lstm_cell lt lu_solve lu_unpack manual_seed margin_ranking_loss masked_fill
        masked_scatter masked_select matmul matrix_exp matrix_power max max_pool1d
        max_pool1d_with_indices max_pool2d max_pool3d maximum mean median memory_format
        merge_type_from_type_comment meshgrid min minimum miopen_batch_norm miopen_convolution
        miopen_convolution_add_relu miopen_convolution_relu miopen_convolution_transpose
        miopen_ctc_loss miopen_depthwise_convolution miopen_rnn mkldnn_adaptive_avg_pool2d
        mkldnn_convolution mkldnn_linear_backward_weights mkldnn_max_pool2d mkldnn_max_pool3d
        mkldnn_rnn_layer mm mode moveaxis movedim msort mul multinomial multiply mv mvlgamma nan
        nan_to_num nan_to_num_ nanmean nanmedian nanquantile nansum narrow narrow_copy
        native_batch_norm native_channel_shuffle native_dropout native_group_norm native_layer_norm
        native_norm ne neg neg_ negative negative_ newaxis nextafter no_grad nonzero nonzero_static
        norm norm_except_dim normal not_equal nuclear_norm numel ones ones_like orgqr ormqr outer
        pairwise_distance parse_ir parse_schema parse_type_comment pdist permute permute_copy pi
        pinverse pixel_shuffle pixel_unshuffle poisson poisson_nll_loss polar polygamma positive pow
        prelu prod promote_types put q_per_channel_axis q_per_channel_scales
        q_per_channel_zero_points q_scale q_zero_point qint32 qint8 qr qscheme quantile
        quantize_per_channel quantize_per_tensor quantize_per_tensor_dynamic quantized_batch_norm
        quantized_gru_cell quantized_lstm_cell quantized_max_pool1d quantized_max_pool2d
        quantized_max_pool3d quantized_rnn_relu_cell quantized_rnn_tanh_cell quint2x4 quint4x2
        quint8 rad2deg rad2deg_ rand rand_like randint randint_like randn randn_like randperm range
        ravel real reciprocal reciprocal_ relu relu_ remainder renorm repeat_interleave reshape
        resize_as_ resize_as_sparse_ resolve_conj resolve_neg result_type rms_norm rnn_relu
        rnn_relu_cell rnn_tanh rnn_tanh_cell roll rot90 round round_ row_indices_copy row_stack
        rrelu rrelu_ rsqrt rsqrt_ rsub saddmm save scalar_tensor scatter scatter_add scatter_reduce
        searchsorted seed select select_copy select_scatter selu selu_ set_anomaly_enabled
        set_autocast_cache_enabled set_autocast_cpu_dtype set_autocast_cpu_enabled
        set_autocast_dtype set_autocast_enabled set_autocast_gpu_dtype set_autocast_ipu_dtype
        set_autocast_ipu_enabled set_autocast_xla_dtype set_autocast_xla_enabled set_default_device
        set_default_tensor_type set_deterministic_debug_mode set_float32_matmul_precision
        set_flush_denormal set_num_interop_threads set_num_threads set_printoptions set_rng_state
        set_warn_always sgn short sigmoid sigmoid_ sign signbit sin sin_ sinc sinc_ sinh sinh_
        slice_copy slice_inverse slice_scatter slogdet smm softmax sort sparse_bsc_tensor
        sparse_bsr_tensor sparse_compressed_tensor sparse_coo_tensor sparse_csc_tensor
        sparse_csr_tensor split split_copy split_with_sizes split_with_sizes_copy spmm sqrt sqrt_
        square square_ squeeze squeeze_copy sspaddmm stack std std_mean stft sub subtract sum svd
        swapaxes swapdims sym_constrain_range sym_constrain_range_for_size sym_float sym_fresh_size
        sym_int sym_ite sym_max sym_min sym_not sym_sqrt sym_sum t t_copy take take_along_dim tan
        tan_ tanh tanh_ tensor tensor_split tensordot thread_safe_generator threshold threshold_
        tile topk trace transpose transpose_copy trapezoid trapz triangular_solve tril tril_indices
        triplet_margin_loss triu triu_indices true_divide trunc trunc_ typename uint1 uint16 uint2
        uint3 uint32 uint4 uint5 uint6 uint64 uint7 uint8 unbind unbind_copy unflatten unfold_copy
        unify_type_list unique_consecutive unravel_index unsafe_chunk unsafe_split
        unsafe_split_with_sizes unsqueeze unsqueeze_copy use_deterministic_algorithms values_copy
        vander var var_mean vdot view_as_complex view_as_complex_copy view_as_real view_as_real_copy
        view_copy vmap vsplit vstack wait where xlogy xlogy_ zero_ zeros zeros_like
    """,
    "torch.nn": """
        AdaptiveAvgPool1d AdaptiveAvgPool2d AdaptiveAvgPool3d AdaptiveLogSoftmaxWithLoss
        AdaptiveMaxPool1d AdaptiveMaxPool2d AdaptiveMaxPool3d AlphaDropout AvgPool1d AvgPool2d
        AvgPool3d BCELoss BCEWithLogitsLoss BatchNorm1d BatchNorm2d BatchNorm3d Bilinear Buffer CELU
        CTCLoss ChannelShuffle CircularPad1d CircularPad2d CircularPad3d ConstantPad1d ConstantPad2d
        ConstantPad3d Container Conv1d Conv2d Conv3d ConvTranspose1d ConvTranspose2d ConvTranspose3d
        CosineEmbeddingLoss CosineSimilarity CrossEntropyLoss CrossMapLRN2d DataParallel Dropout
        Dropout1d Dropout2d Dropout3d ELU Embedding EmbeddingBag FeatureAlphaDropout Flatten Fold
        FractionalMaxPool2d FractionalMaxPool3d GELU GLU GRU GRUCell GaussianNLLLoss GroupNorm
        Hardshrink Hardsigmoid Hardswish Hardtanh HingeEmbeddingLoss HuberLoss Identity
        InstanceNorm1d InstanceNorm2d InstanceNorm3d KLDivLoss L1Loss LPPool1d LPPool2d LPPool3d
        LSTM LSTMCell LayerNorm LazyBatchNorm1d LazyBatchNorm2d LazyBatchNorm3d LazyConv1d
        LazyConv2d LazyConv3d LazyConvTranspose1d LazyConvTranspose2d LazyConvTranspose3d
        LazyInstanceNorm1d LazyInstanceNorm2d LazyInstanceNorm3d LazyLinear LeakyReLU Linear
        LinearCrossEntropyLoss LinearCrossEntropyOptions LocalResponseNorm LogSigmoid LogSoftmax
        MSELoss MarginRankingLoss MaxPool1d MaxPool2d MaxPool3d MaxUnpool1d MaxUnpool2d MaxUnpool3d
        Mish Module ModuleDict ModuleList MultiLabelMarginLoss MultiLabelSoftMarginLoss
        MultiMarginLoss MultiheadAttention NLLLoss NLLLoss2d PReLU PairwiseDistance Parameter
        ParameterDict ParameterList PixelShuffle PixelUnshuffle PoissonNLLLoss RMSNorm RNN RNNBase
        RNNCell RNNCellBase RReLU ReLU ReLU6 ReflectionPad1d ReflectionPad2d ReflectionPad3d
        ReplicationPad1d ReplicationPad2d ReplicationPad3d SELU Sequential SiLU Sigmoid SmoothL1Loss
        SoftMarginLoss Softmax Softmax2d Softmin Softplus Softshrink Softsign SyncBatchNorm Tanh
        Tanhshrink Threshold Transformer TransformerDecoder TransformerDecoderLayer
        TransformerEncoder TransformerEncoderLayer TripletMarginLoss TripletMarginWithDistanceLoss
        Unflatten Unfold UninitializedBuffer UninitializedParameter Upsample UpsamplingBilinear2d
        UpsamplingNearest2d ZeroPad1d ZeroPad2d ZeroPad3d attention common_types factory_kwargs
        functional grad init intrinsic modules parallel parameter qat quantizable quantized utils
    """,
    "torch.nn.functional": """
        BroadcastingList1 BroadcastingList2 BroadcastingList3 Callable DType
        GRID_SAMPLE_INTERPOLATION_MODES GRID_SAMPLE_PADDING_MODES Optional ScalingType SwizzleType
        TYPE_CHECKING Tensor adaptive_avg_pool1d adaptive_avg_pool2d adaptive_avg_pool3d
        adaptive_max_pool1d adaptive_max_pool1d_with_indices adaptive_max_pool2d
        adaptive_max_pool2d_with_indices adaptive_max_pool3d adaptive_max_pool3d_with_indices
        affine_grid alpha_dropout assert_int_or_pair avg_pool1d avg_pool2d avg_pool3d batch_norm
        bilinear binary_cross_entropy binary_cross_entropy_with_logits boolean_dispatch celu celu_
        channel_shuffle conv1d conv2d conv3d conv_tbc conv_transpose1d conv_transpose2d
        conv_transpose3d cosine_embedding_loss cosine_similarity cross_entropy ctc_loss dropout
        dropout1d dropout2d dropout3d elu elu_ embedding embedding_bag feature_alpha_dropout fold
        fractional_max_pool2d fractional_max_pool2d_with_indices fractional_max_pool3d
        fractional_max_pool3d_with_indices gaussian_nll_loss gelu glu grid_sample group_norm
        grouped_mm gumbel_softmax handle_torch_function hardshrink hardsigmoid hardswish hardtanh
        hardtanh_ has_torch_function has_torch_function_unary has_torch_function_variadic
        hinge_embedding_loss huber_loss instance_norm interpolate kl_div l1_loss layer_norm
        leaky_relu leaky_relu_ linear linear_cross_entropy local_response_norm log_softmax
        logsigmoid lp_pool1d lp_pool2d lp_pool3d margin_ranking_loss max_pool1d
        max_pool1d_with_indices max_pool2d max_pool2d_with_indices max_pool3d
        max_pool3d_with_indices max_unpool1d max_unpool2d max_unpool3d mish mse_loss
        multi_head_attention_forward multi_margin_loss multilabel_margin_loss
        multilabel_soft_margin_loss native_channel_shuffle nll_loss normalize one_hot pad
        pairwise_distance pdist pixel_shuffle pixel_unshuffle poisson_nll_loss prelu relu relu6
        relu_ reproducibility_notes rms_norm rrelu rrelu_ scaled_dot_product_attention
        scaled_grouped_mm scaled_mm selu selu_ sigmoid silu smooth_l1_loss soft_margin_loss softmax
        softmin softplus softshrink softsign sparse_support_notes tanh tanhshrink tf32_notes
        threshold threshold_ triplet_margin_loss triplet_margin_with_distance_loss unfold upsample
        upsample_bilinear upsample_nearest
    """,
    "torch.optim": """
        ASGD Adadelta Adafactor Adagrad Adam AdamW Adamax LBFGS Muon NAdam Optimizer RAdam RMSprop
        Rprop SGD SparseAdam lr_scheduler swa_utils swap_in_optimizer_params_and_state
    """,
    "torch.optim.lr_scheduler": """
        ChainedScheduler ConstantLR CosineAnnealingLR CosineAnnealingWarmRestarts CyclicLR
        ExponentialLR LRScheduler LambdaLR LinearLR MultiStepLR MultiplicativeLR OneCycleLR
        PolynomialLR ReduceLROnPlateau SequentialLR StepLR
    """,
    "torch.utils.data": """
        BatchSampler ChainDataset ConcatDataset DFIterDataPipe DataChunk DataLoader Dataset
        DistributedSampler IterDataPipe IterableDataset MapDataPipe RandomSampler Sampler
        SequentialSampler StackDataset Subset SubsetRandomSampler TensorDataset
        WeightedRandomSampler _DatasetKind argument_validation default_collate default_convert
        functional_datapipe get_worker_info guaranteed_datapipes_determinism non_deterministic
        random_split runtime_validation runtime_validation_disabled
    """,
}

EXPORTS: dict[str, frozenset[str]] = {module: frozenset(names.split())
                                      for module, names in _NAMES.items()}
"""module -> the names ``from module import *`` binds."""


def render() -> str:
    """This module's source with the tables of the installed torch (imports torch)."""
    import importlib
    import inspect
    import textwrap

    with open(__file__, encoding="utf-8") as f:
        source = f.read()
    head = source[:source.index("_NAMES = {")]
    tail = source[source.index("\n\nEXPORTS"):]
    rows = []
    for name in MODULES:
        module = importlib.import_module(name)
        listed = getattr(module, "__all__", None)
        names = list(listed) if listed is not None else [n for n in vars(module)
                                                         if not n.startswith("_")]
        keep = []
        for n in names:
            value = getattr(module, n, None)
            if inspect.ismodule(value) and value.__name__ != f"{name}.{n}":
                continue  # a module it imports, not one of its own
            keep.append(n)
        body = textwrap.fill(" ".join(sorted(set(keep))), width=92, break_on_hyphens=False)
        rows.append(f'    "{name}": """\n{textwrap.indent(body, "        ")}\n    """,')
    return head + "_NAMES = {\n" + "\n".join(rows) + "\n}" + tail


if __name__ == "__main__":
    print(render(), end="")
