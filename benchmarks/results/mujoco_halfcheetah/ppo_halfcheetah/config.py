# Resolved configuration of experiment 'ppo_halfcheetah', written by rlearn 0.1.0 on 2026-11-28 13:16:38.
# Every default is filled in (docs/configuration.md describes each key). Run it again with:
#     .venv/bin/rlearn train /tmp/learn/ppo_halfcheetah/config.py
inf = float("inf")
nan = float("nan")

config = {
    'exp_name': 'ppo_halfcheetah',  # names the run: the work dir work_dirs/<exp_name>, the log <exp_name>.log and the logger
    'seed': 0,  # seeds Python's random, numpy, torch, the training environments (env i gets seed + i)...
    'device': 'cpu',  # torch device of the networks ("cuda", "cuda:1", or "auto": CUDA when available)
    'num_threads': 1,  # torch.set_num_threads for the run, or None to leave torch's default
    'profile': False,  # record a timeline trace into <work_dir>/trace/ (also switched on by RLEARN_PROFILE=1)
    'custom_imports': [],  # modules ("my_pkg.my_policies") or Python files ("path/to/file.py") imported before...
    'env': {
        'id': 'HalfCheetah-v5',  # a registered gymnasium id ("Pendulum-v1", "CartPole-v1")
        'num_envs': 1,  # sub-environments stepped together as one vector env
        'asynchronous': False,  # one worker process per sub-environment (AsyncVectorEnv) instead of stepping them in turn
        'kwargs': {},  # keyword arguments for every sub-environment's constructor (gymnasium.make(id, **kwargs))
    },
    'policy': {
        'type': 'ppo',  # a registered name ("td3", "ppg", "ppo", "dqn", "sac", or one added with...
        'reward_scale': 1.0,  # rewards are multiplied by it before GAE
        'clip_ratio': 0.1,  # PPO clip range eps of the ratio pi / pi_collect
        'clip_follows_lr': False,  # scale the clip range by current lr / lr (a linear lr decay decays it too, like...
        'entropy_coef': 0.000401762,  # weight of the entropy bonus
        'max_grad_norm': 0.8,  # the gradient's global norm is clipped to this before each Adam step
        'hidden_sizes': [256, 256],  # hidden layers of each network
        'activation': 'relu',  # "tanh" or "relu"
        'init_log_std': -2.0,  # initial log-std of the Gaussian (continuous actions)
        'rollout_steps': 512,  # steps per environment per update
        'gamma': 0.98,  # discount
        'gae_lambda': 0.92,  # GAE's lambda
        'epochs': 20,  # passes over the rollout per update
        'minibatch_size': 64,  # transitions per gradient step
        'clip_value': None,  # clip range of the value loss around the collect-time value (None: no value clipping)
        'value_coef': 0.58096,  # weight of the value loss
        'normalize_advantage': True,  # normalise the advantages per minibatch
        'target_kl': None,  # stop an update once a minibatch's approx_kl exceeds 1.5 x this (None: always run every...
        'lr': 2.0633e-05,  # initial learning rate of the Adam optimizer "ac"
    },
    'buffer': {
        'size': 100000,  # transitions kept
    },
    'train': {
        'max_env_steps': 1000000,  # the run ends once this many env steps (summed over environments) are collected
        'collect_steps': 1,  # off-policy: steps per environment collected between two rounds of learner iterations
        'updates_per_step': 1.0,  # off-policy: learner iterations per collected env step once envstep >...
    },
    'learner': {
        'log_freq': 20,  # train iterations between two tables / TensorBoard points (see reading-the-logs.md)
        'monitor_window': 20,  # window of every monitored key, in train iterations
        'monitor_windows': {},  # per-key windows
        'strict': False,  # an undeclared key returned by the policy is an error instead of a warning, and so is a...
        'hooks': [],  # extra hooks as dicts
        'writers': ['table', 'tensorboard', 'jsonl'],  # where every logged number goes: "table" (the log), "tensorboard" (tb/), "jsonl"...
        'log_processor': {
            'custom_cfg': [],  # entries dict(data_src=KEY, method_name=STAT, window_size=N, log_name=NAME) (STAT...
        },
    },
    'eval': {
        'freq': 10240,  # evaluate every time envstep passes a multiple of freq (and always at the end)
        'episodes': 10,  # complete episodes per evaluation, with the deterministic policy (_forward_eval)
        'num_envs': 10,  # evaluation environments (separate from the training ones, seeded from seed)
        'stop_value': None,  # end the run once the evaluation's mean return is >= stop_value
        'patience': None,  # end the run after this many evaluations in a row without a new best mean return (stop...
        'save_best': True,  # save <work_dir>/ckpt/best.pt (a full checkpoint) at every evaluation whose mean return...
        'video': False,  # record one evaluation episode as <work_dir>/videos/envstep_<N>.mp4 (needs pip install...
        'video_freq': None,  # with video: a video at the first evaluation after each new multiple of video_freq env...
    },
    'checkpoint': {
        'freq': 100,  # train iterations between two checkpoints
        'keep': 3,  # how many iteration_<n>.pt files to keep (the newest)
    },
    'dist': {
        'backend': None,  # torch.distributed backend: "gloo" (CPU) or "nccl" (GPU)
        'timeout_s': 300.0,  # seconds a collective waits for the other ranks before failing, so a rank that hangs or...
    },
}
