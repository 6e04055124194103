import { familyBudget } from '../budget.js';

familyBudget('mixed');
