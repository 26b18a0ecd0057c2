# Resolved configuration of experiment 'sac_halfcheetah', written by rlearn 0.1.0 on 2026-11-28 13:32:51.
# Every default is filled in (docs/configuration.md describes each key). Run it again with:
#     .venv/bin/rlearn train /tmp/learn/sac_halfcheetah/seed_0/config.py
# or continue this run with:
#     .venv/bin/rlearn train /tmp/learn/sac_halfcheetah/seed_0/config.py --work-dir /tmp/learn/sac_halfcheetah/seed_0 --resume
inf = float("inf")
nan = float("nan")

config = {
    'exp_name': 'sac_halfcheetah',  # names the run: the work dir work_dirs/<exp_name>, the log <exp_name>.log and the logger
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
        'type': 'sac',  # a registered name ("td3", "ppg", "ppo", "dqn", "sac", or one added with...
        'learning_starts': 10000,  # env steps of uniformly random actions
        'batch_size': 256,  # minibatch size sampled from the replay buffer per train iteration
        'hidden_sizes': [256, 256],  # hidden layers of the actor and of each critic
        'gamma': 0.99,  # discount
        'tau': 0.005,  # Polyak coefficient of the target networks
        'learn_threads': 1,  # torch threads a train iteration runs with (CPU only
        'adaptive_threads': True,  # with learn_threads > 1, measure every 1000 iterations whether the threads pay and use...
        'precision': 'fp32',  # "bf16" runs the networks' products in bfloat16 with fp32 parameters and optimizers...
        'lr_actor': 0.0003,  # Adam learning rate of the actor
        'lr_critic': 0.0003,  # Adam learning rate of the twin critics
        'lr_alpha': 0.0003,  # Adam learning rate of the temperature (autotune)
        'policy_frequency': 2,  # every that many iterations, that many actor + temperature updates
        'autotune': True,  # learn the temperature alpha
        'init_alpha': 1.0,  # the temperature's start (or, without autotune, fixed) value
        'target_entropy': None,  # the entropy autotune aims at
        'log_std_min': -20.0,  # lower clamp of the actor's log standard deviation
        'log_std_max': 2.0,  # upper clamp of the actor's log standard deviation (> log_std_min)
    },
    'buffer': {
        'size': 1000000,  # transitions kept
    },
    'train': {
        'max_env_steps': 300000,  # the run ends once this many env steps (summed over environments) are collected
        'collect_steps': 1,  # off-policy: steps per environment collected between two rounds of learner iterations
        'updates_per_step': 1.0,  # off-policy: learner iterations per collected env step once envstep >...
    },
    'learner': {
        'log_freq': 1000,  # train iterations between two tables / TensorBoard points (see reading-the-logs.md)
        'monitor_window': None,  # window of every monitored key, in train iterations
        'monitor_windows': {},  # per-key windows
        'strict': False,  # an undeclared key returned by the policy is an error instead of a warning, and so is a...
        'hooks': [],  # extra hooks as dicts
        'writers': ['table', 'tensorboard', 'jsonl'],  # where every logged number goes: "table" (the log), "tensorboard" (tb/), "jsonl"...
        'log_processor': {
            'custom_cfg': [],  # entries dict(data_src=KEY, method_name=STAT, window_size=N, log_name=NAME) (STAT...
        },
    },
    'eval': {
        'freq': 10000,  # evaluate every time envstep passes a multiple of freq (and always at the end)
        'episodes': 10,  # complete episodes per evaluation, with the deterministic policy (_forward_eval)
        'num_envs': 10,  # evaluation environments (separate from the training ones, seeded from seed)
        'stop_value': None,  # end the run once the evaluation's mean return is >= stop_value
        'patience': None,  # end the run after this many evaluations in a row without a new best mean return (stop...
        'save_best': True,  # save <work_dir>/ckpt/best.pt (a full checkpoint) at every evaluation whose mean return...
        'video': False,  # record one evaluation episode as <work_dir>/videos/envstep_<N>.mp4 (needs pip install...
        'video_freq': None,  # with video: a video at the first evaluation after each new multiple of video_freq env...
    },
    'checkpoint': {
        'freq': 10000,  # train iterations between two checkpoints
        'keep': 3,  # how many iteration_<n>.pt files to keep (the newest)
    },
    'dist': {
        'backend': None,  # torch.distributed backend: "gloo" (CPU) or "nccl" (GPU)
        'timeout_s': 300.0,  # seconds a collective waits for the other ranks before failing, so a rank that hangs or...
    },
}
