"""Rewards for post-training (issue 20): the reward model and rule rewards, combined per prompt type."""

from .combine import COMPONENTS, DEFAULT_WEIGHTS, RewardConfig, RewardScorer, reward_config
from .rules import RuleScore, code_reward, instruction_reward, math_reward, parse_tool_calls, tool_reward

__all__ = ["COMPONENTS", "DEFAULT_WEIGHTS", "RewardConfig", "RewardScorer", "RuleScore", "code_reward",
           "instruction_reward", "math_reward", "parse_tool_calls", "reward_config", "tool_reward"]
